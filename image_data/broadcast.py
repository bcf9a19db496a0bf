"""One rank reads and checks the dataset index; the others receive it.

Reading on every rank multiplies the file-system metadata calls on image
paths by the number of ranks (1,024 ranks x 1.28M paths in the paper). Here
rank 0 reads, as ChainerMN's ImageNet example does, and an index travels as
its three arrays by ``MPI_Bcast`` of raw buffers (about 60 MB for ImageNet),
not as a pickled list of tuples.
"""
import functools
import os
import time

from image_data import index_file
from image_data.image_index import ImageIndex
from image_data.image_list import read_datasets
from largebatch.errors import InputError


def broadcast_index(mpi_comm, read, root=0):
    """Run ``read()`` on rank ``root`` alone; return its result on all ranks.

    ``read`` returns a tuple; its :class:`ImageIndex` items are sent with
    ``Bcast`` of their arrays, the other (small) items with ``bcast``. An
    :class:`InputError` raised by ``read`` is raised on every rank with the
    same message, so that bad input ends the whole job with one line.

    Args:
        mpi_comm: an mpi4py communicator (a ChainerMN communicator's
            ``mpi_comm``).
        read: a callable without arguments, run on rank ``root`` only.
        root: the reading rank.
    """
    result, error = None, None
    if mpi_comm.rank == root:
        try:
            result = tuple(read())
        except InputError as e:
            error = str(e)
    _wait_for_all(mpi_comm)
    error = mpi_comm.bcast(error, root)
    if error is not None:
        raise InputError(error)
    heads = mpi_comm.bcast(None if result is None else [
        _Layout(x.layout()) if isinstance(x, ImageIndex) else x
        for x in result], root)
    items, error = list(result or heads), None
    if mpi_comm.rank != root:
        try:  # every rank learns of one that has no room before the sends
            items = [ImageIndex.allocate(*head) if isinstance(head, _Layout)
                     else head for head in heads]
        except InputError as e:
            error = 'worker {}: {}'.format(mpi_comm.rank, e)
    error = next((e for e in mpi_comm.allgather(error) if e), None)
    if error is not None:
        raise InputError(error)
    for index in items:
        if isinstance(index, ImageIndex):
            for buf in index.buffers():
                mpi_comm.Bcast(buf, root)
            index.freeze()
    return tuple(items)


def load_datasets(mpi_comm, train, val, root='.', n_class=None, side=None):
    """``(train, val, n_class)``: from ``.npz`` files of decoded images
    (:mod:`image_data.in_memory`, ``side`` pixels; every rank reads its own
    copy, one file read), else :func:`load_index` of list files, class
    folders or archive indexes."""
    if train.endswith('.npz'):
        # imported here: the package does not load the module that
        # ``python -m image_data.in_memory`` runs as __main__
        from image_data import in_memory
        return in_memory.read_datasets(train, val, side, n_class)
    return load_index(mpi_comm, train, val, root, n_class)


def class_count_source(train, n_class=None):
    """Where the class count of :func:`load_datasets` comes from, in words,
    for the line that prints it."""
    if n_class is not None:
        return '--n-class'
    if os.path.isdir(train):
        return 'the class folders'
    if index_file.is_index(train):
        return 'the index\'s classes'
    return 'the class names, or the largest label + 1'


def load_index(mpi_comm, train, val, root='.', n_class=None):
    """``(train_index, val_index, n_class)``, read and checked on rank 0.

    Arguments after ``mpi_comm`` are those of
    :func:`image_data.image_list.read_datasets`.
    """
    return broadcast_index(
        mpi_comm, functools.partial(read_datasets, train, val, root, n_class))


class _Layout(tuple):
    """``(root, n, blob_size)`` of an index that follows by ``Bcast``."""


def _wait_for_all(mpi_comm, interval=0.01):
    """Sleep until every rank is here. Ranks waiting in a blocking broadcast
    spin, taking the cores that the reader needs on a shared node."""
    request = mpi_comm.Ibarrier()
    while not request.Test():
        time.sleep(interval)

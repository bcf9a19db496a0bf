"""Rank 0 reads the dataset index; every rank gets the same one.

Usage: index_broadcast.py IMAGE_DIR TRAIN VAL [ROOT]
Counts, per rank, the file-system calls (stat, lstat, listdir, scandir,
open) on paths under IMAGE_DIR through wrappers of those functions, loads
the index as train_imagenet.py does (:func:`image_data.load_index` inside
``imagenet_job.agreement.agree``), has a loader process of a
GlobalOrderIterator read from the received index, and prints one JSON line
per rank.
"""
import builtins
import hashlib
import json
import multiprocessing
import os
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)


def pair_transform(example, rng):
    return example


def count_calls(image_dir, names=('stat', 'lstat', 'listdir', 'scandir')):
    """Wrap ``os.<names>`` and ``open``; return the list that each call on
    a path under ``image_dir`` appends its function's name to."""
    calls = []

    def counting(function):
        def wrapper(path='.', *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)) and \
                    os.fsdecode(path).startswith(image_dir):
                calls.append(function.__name__)
            return function(path, *args, **kwargs)
        return wrapper

    for name in names:
        setattr(os, name, counting(getattr(os, name)))
    builtins.open = counting(builtins.open)
    return calls


def digest(index):
    h = hashlib.sha256(index.root.encode())
    for buf in index.buffers():
        h.update(buf.tobytes())
    return h.hexdigest()


def main():
    calls = count_calls(os.path.abspath(sys.argv[1]))
    # The loaders' forkserver starts before MPI, as in train_imagenet.py.
    multiprocessing.set_start_method('forkserver', force=True)
    p = multiprocessing.Process()
    p.start()
    p.join()

    import chainermn
    import image_data
    from imagenet_job.agreement import agree
    from imagenet_job.endings import ending_the_job

    comm = chainermn.create_communicator('naive')
    with ending_the_job(out=None):
        train, val, n_class = agree(
            comm, image_data.load_index, comm.mpi_comm, *sys.argv[2:])
    n_calls = len(calls)
    args = (train, 1, pair_transform, comm.rank, comm.size)
    pooled = image_data.GlobalOrderIterator(*args, n_processes=1)
    here = image_data.GlobalOrderIterator(*args)
    from_loader, expected = next(pooled), next(here)
    pooled.finalize()
    print(json.dumps({
        'rank': comm.rank, 'calls': n_calls, 'n_class': n_class,
        'train': [len(train), digest(train)], 'val': [len(val), digest(val)],
        'loader_matches': from_loader == expected}))


if __name__ == '__main__':
    main()

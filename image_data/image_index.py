"""A dataset index as three arrays in one shared-memory segment.

A Python list of ``(path, label)`` tuples costs about 150 bytes an image
(a tuple, a str and an int object each), and every loader process that
unpickles it holds its own copy. Here the relative paths are one byte blob
(file-system encoding) cut by ``int64`` offsets, the labels an ``int32``
array: about 50 bytes an ImageNet image, 60 MB for 1.28M. The arrays live in
a POSIX shared-memory segment that pickles by name, so loader processes
attach to the owner's pages instead of copying them. The process that
created the segment unlinks it when its index is garbage collected.
"""
import array
import os
import secrets
import weakref
from multiprocessing import shared_memory

import numpy

from largebatch.errors import InputError
from largebatch import processes

#: Shared-memory names start with this, the creating process's PID namespace
#: and its id (:func:`segment_prefix`).
SEGMENT_PREFIX = 'image_index_'
_SHM_DIR = '/dev/shm'


def _namespace_prefix():
    """The start of the names of the segments of this process's PID
    namespace, named by its inode: a process id names one process within its
    namespace only, and several namespaces (containers, emulated nodes) may
    share one /dev/shm."""
    try:
        namespace = os.stat('/proc/self/ns/pid').st_ino
    except OSError:  # no /proc: not Linux
        namespace = 0
    return '{}{}_'.format(SEGMENT_PREFIX, namespace)


def segment_prefix(pid):
    """The start of the names of the segments that process ``pid`` of this
    PID namespace creates."""
    return '{}{}_'.format(_namespace_prefix(), pid)


def remove_stale_segments():
    """Unlink the segments of processes of this PID namespace that no longer
    run (:func:`processes.runs`).

    A job that is killed (SIGKILL, or MPI_Abort taking the whole process
    tree) cannot unlink its segments; the next index made on the node in the
    same namespace removes them, so a killed run leaks its index only until
    the next one. Segments of other namespaces, whose processes this one
    cannot see, are left alone.
    """
    try:
        names = os.listdir(_SHM_DIR)
    except OSError:  # no /dev/shm: not Linux
        return
    ours = _namespace_prefix()
    for name in names:
        pid = name[len(ours):].split('_')[0]
        if not name.startswith(ours) or not pid.isdigit():
            continue
        if not processes.runs(int(pid)):
            try:
                os.remove(os.path.join(_SHM_DIR, name))
            except OSError:
                pass


def segment_fields(n, blob_size, records=False):
    """``(name, dtype, length)`` of each array of a segment, in the order
    it holds them (8-byte arrays first, so that every array is aligned):
    an index file (:mod:`image_data.index_file`) holds them in the same."""
    return [('offsets', numpy.int64, n + 1)] + (
        [('starts', numpy.int64, n), ('lengths', numpy.int64, n)]
        if records else []) + [('labels', numpy.int32, n)] + (
        [('crc32c', numpy.uint32, n)] if records else []) + [
        ('blob', numpy.uint8, blob_size)]


class _Segment(object):
    """``offsets`` (n + 1), ``labels`` (n) and ``blob`` in one segment, and
    for an index of records in one archive (``records``) ``starts``,
    ``lengths`` and ``crc32c`` (n each): where each image's bytes lie in the
    archive, and their CRC32C (0 in an index without checksums).

    Created empty (``name`` None: this process owns the segment and unlinks
    it when the segment is garbage collected or at exit) or attached by
    name. The finalizer drops the arrays before closing the mapping, which
    cannot be closed while NumPy views of it are alive.
    """

    def __init__(self, n, blob_size, records=False, name=None):
        self.n = n
        self.blob_size = blob_size
        self.records = records
        fields = segment_fields(n, blob_size, records)
        size = sum(numpy.dtype(dtype).itemsize * count
                   for _, dtype, count in fields)
        owner = name is None
        if owner:
            remove_stale_segments()
            name = segment_prefix(os.getpid()) + secrets.token_hex(6)
            _reserve(name, size)
        shm = shared_memory.SharedMemory(name, False, size)
        self.name = shm.name
        self._arrays, start = {}, 0
        for field, dtype, count in fields:
            self._arrays[field] = numpy.ndarray(count, dtype, shm.buf, start)
            start += self._arrays[field].nbytes
        if not owner:
            self.freeze()
        weakref.finalize(self, _release, shm, self._arrays, owner)

    def __getattr__(self, field):
        try:
            return self.__dict__['_arrays'][field]
        except KeyError:
            raise AttributeError(field) from None

    @property
    def nbytes(self):
        return sum(a.nbytes for a in self._arrays.values())

    def buffers(self):
        """The arrays, for filling by MPI broadcast or from a file."""
        return list(self._arrays.values())

    def freeze(self):
        """Make the arrays read-only once they are filled."""
        for a in self._arrays.values():
            a.flags.writeable = False

    def __reduce__(self):
        return _Segment, (self.n, self.blob_size, self.records, self.name)


def _reserve(name, size):
    """Create segment ``name`` with its ``size`` bytes reserved.

    A segment's pages are taken from /dev/shm (a tmpfs) when first touched:
    on a full one (Docker's default is 64 MB) that kills the process with
    SIGBUS. Reserved up front, a shortage is an :class:`InputError` here,
    naming the space needed and the fix.
    """
    path = os.path.join(_SHM_DIR, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     0o600)
    except OSError as e:
        raise InputError('{}: cannot hold the image index ({}); the index '
                         'lives in this shared-memory folder'.format(
                             _SHM_DIR, e.strerror))
    try:
        os.posix_fallocate(fd, 0, max(size, 1))
    except OSError as e:
        os.unlink(path)
        free = os.statvfs(_SHM_DIR)
        raise InputError(
            '{}: no room for the image index ({:,} bytes, {:,} free; {}): '
            'give it more (docker run --shm-size=1g) or free it'.format(
                _SHM_DIR, size, free.f_bavail * free.f_frsize, e.strerror))
    finally:
        os.close(fd)


def _release(shm, arrays, owner):
    if owner:
        shm.unlink()
    arrays.clear()
    shm.close()


class ImageIndex(object):
    """``(path, label)`` pairs, read-only, in shared memory.

    Indexing gives ``(os.path.join(root, relative path), int label)``, as the
    list the iterators took before; a slice with step 1 is a view of the
    same segment (validation shards copy nothing). An index of records in
    one archive (:mod:`image_data.index_file`) has an
    :class:`~image_data.archive_members.Archive` as its root and gives
    ``(archive member, int label)``: the member reads its bytes from the
    archive.

    Args:
        root: directory the stored paths are relative to.
        pairs: ``(relative path, label)`` pairs, any iterable (a reader's
            generator is consumed in one pass, without a list of tuples).
    """

    def __init__(self, root, pairs):
        blob, ends, labels = bytearray(), array.array('q'), array.array('i')
        for path, label in pairs:
            blob += os.fsencode(path)
            ends.append(len(blob))
            labels.append(label)
        segment = _Segment(len(ends), len(blob))
        segment.offsets[0] = 0
        segment.offsets[1:] = ends
        segment.labels[:] = labels
        segment.blob[:] = numpy.frombuffer(blob, numpy.uint8)
        segment.freeze()
        self._init(root, segment, 0, segment.n)

    @classmethod
    def allocate(cls, root, n, blob_size, records=False):
        """An index of ``n`` paths, ``blob_size`` bytes in all (and of
        ``records`` in an archive), to be filled through :meth:`buffers` and
        then frozen (an MPI receive buffer, or a file's arrays)."""
        return cls.from_segment(root, _Segment(n, blob_size, records))

    @classmethod
    def from_segment(cls, root, segment, start=0, stop=None):
        index = cls.__new__(cls)
        index._init(root, segment, start,
                    segment.n if stop is None else stop)
        return index

    def _init(self, root, segment, start, stop):
        self.root = root
        self.segment = segment
        self._start = start
        self._stop = stop

    def __len__(self):
        return self._stop - self._start

    def __getitem__(self, key):
        rows = range(self._start, self._stop)
        if isinstance(key, slice):
            rows = rows[key]
            if rows.step != 1 and len(rows) > 1:
                raise ValueError('an ImageIndex slice needs step 1, got {}'
                                 .format(key.step))
            return ImageIndex.from_segment(self.root, self.segment,
                                           rows.start,
                                           max(rows.start, rows.stop))
        i = rows[key]
        segment = self.segment
        name = os.fsdecode(
            segment.blob[segment.offsets[i]:segment.offsets[i + 1]].tobytes())
        if segment.records:
            source = self.root.member(name, int(segment.starts[i]),
                                      int(segment.lengths[i]),
                                      int(segment.crc32c[i]))
        else:
            source = os.path.join(self.root, name)
        return source, int(segment.labels[i])

    def layout(self):
        """``(root, n, blob_size, records)``: what :meth:`allocate` takes to
        hold a copy of this (whole) index."""
        return (self.root, self.segment.n, self.segment.blob_size,
                self.segment.records)

    def buffers(self):
        """The offsets, labels and path bytes of the whole index."""
        return self.segment.buffers()

    def freeze(self):
        self.segment.freeze()

    @property
    def labels(self):
        """A copy of the labels, as an ``int32`` array."""
        return self.segment.labels[self._start:self._stop].copy()

    @property
    def nbytes(self):
        """Bytes of the shared segment (of the whole index, for a slice)."""
        return self.segment.nbytes

    def __reduce__(self):
        return ImageIndex.from_segment, (self.root, self.segment,
                                         self._start, self._stop)

    def __repr__(self):
        return '<ImageIndex of {} images under {}>'.format(
            len(self), self.root)

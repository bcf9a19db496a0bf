"""Images read out of one archive file with ``os.pread``, one open a process.

A shared file system serves a few large files far better than 1.28M small
ones: at the paper's pace (an epoch in 10 s) one open per image is 128,000
opens a second on the metadata server. Here each process (a worker or a
loader) opens each archive once, on its first read, and reads an image as
one ``pread`` of the bytes its index records: no open, no seek, no shared
file offset between threads.

The archive is checked when it is opened: a regular file (a FIFO or a device
would block or never end), of the size and modification time it had when
it was indexed (else the recorded offsets may point anywhere). With
checksums, each image's bytes are checked against their CRC32C.
"""
import dataclasses
import os
import stat

import google_crc32c

from largebatch.errors import InputError
from image_data.decoding import UndecodableImageError


@dataclasses.dataclass(frozen=True)
class Archive(object):
    """An archive as it was indexed: its path, size and modification time
    (ns), and whether the index holds each image's CRC32C."""
    path: str
    size: int
    mtime_ns: int
    checksums: bool = False

    def member(self, name, start, length, crc32c):
        """The image ``name`` of ``length`` bytes at ``start``."""
        return ArchiveMember(self, name, start, length, crc32c)

    def check(self, status):
        """Raise :class:`InputError` unless ``status`` (an ``os.stat``
        result of :attr:`path`) is this archive's, unchanged."""
        if not stat.S_ISREG(status.st_mode):
            raise InputError('archive {}: not a regular file'.format(
                self.path))
        if (status.st_size, status.st_mtime_ns) != (self.size, self.mtime_ns):
            raise InputError(
                'archive {}: changed since it was indexed (size {}, '
                'modified {} ns; the index records {} and {} ns): index it '
                'again, or copy it with its time (cp -p)'.format(
                    self.path, status.st_size, status.st_mtime_ns, self.size,
                    self.mtime_ns))


@dataclasses.dataclass(frozen=True)
class ArchiveMember(object):
    """One image of an archive, named ``archive:name`` in messages."""
    archive: Archive
    name: str
    start: int
    length: int
    crc32c: int

    def read(self):
        """The image's bytes: one ``pread`` of the archive, opened once per
        process; checked against the CRC32C where the index has one."""
        data = os.pread(_descriptor(self.archive), self.length, self.start)
        if len(data) != self.length:
            raise InputError('archive {}: ends before {} (byte {} of {})'
                             .format(self.archive.path, self.name,
                                     self.start + len(data),
                                     self.archive.size))
        if self.archive.checksums and crc32c(data) != self.crc32c:
            raise UndecodableImageError(
                'image {}: CRC32C {:08x}, the index records {:08x} (the bytes '
                'changed since they were indexed)'.format(
                    self, crc32c(data), self.crc32c))
        return data

    def __str__(self):
        return '{}:{}'.format(self.archive.path, self.name)


def crc32c(data):
    """The CRC32C (Castagnoli) of ``data``, by the CPU's instruction where it
    has one (google-crc32c)."""
    return google_crc32c.value(data)


#: This process's open archives: ``{Archive: descriptor}``, and the process
#: they were opened in (a forked child opens its own).
_open = {}
_opened_in = [None]


def _descriptor(archive):
    if _opened_in[0] != os.getpid():
        _open.clear()
        _opened_in[0] = os.getpid()
    fd = _open.get(archive)
    if fd is None:
        fd = open_archive(archive)
        _open[archive] = fd
    return fd


def open_archive(archive):
    """A read-only descriptor of ``archive``, checked (:meth:`Archive.check`);
    opened without blocking, so that a FIFO in its place cannot hang the
    open."""
    try:
        fd = os.open(archive.path,
                     os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError('archive {}: cannot be opened ({})'.format(
            archive.path, e.strerror))
    try:
        archive.check(os.fstat(fd))
    except InputError:
        os.close(fd)
        raise
    return fd

"""The members of an uncompressed tar, read from their headers alone.

A tar stores each member's bytes whole and in place after its header, so an
index of ``(name, start, length)`` lets a reader take an image straight out
of the archive. Headers are read with the standard library's ``tarfile``
(ustar, GNU and pax names), which seeks over the data: no image is read.
A tar inside a tar (ImageNet's training archive holds one per class) is
read through a window onto the outer file, so its members' starts are
offsets in the outer file.
"""
import collections
import os
import tarfile

from largebatch.errors import InputError

#: The first bytes of the compressed forms a user may hand in for a tar.
COMPRESSED_MAGIC = ((b'\x1f\x8b', 'gzip'), (b'BZh', 'bzip2'),
                    (b'\xfd7zXZ\x00', 'xz'), (b'\x28\xb5\x2f\xfd', 'zstd'))
_BLOCK = 512


#: A regular member: its name, where its bytes start and how many.
TarMember = collections.namedtuple('TarMember', 'name start length')


def check_uncompressed(path, f):
    """Raise :class:`InputError` if the file ``f`` (at ``path``) starts as a
    compressed file does."""
    head = os.pread(f.fileno(), 8, 0)
    for magic, kind in COMPRESSED_MAGIC:
        if head.startswith(magic):
            raise InputError(
                'archive {}: compressed ({}); the index reads the data of an '
                'uncompressed tar in place (ImageNet\'s .tar files are '
                'uncompressed as distributed)'.format(path, kind))


def members(path, f, start=0, length=None):
    """The regular members of the tar at ``start`` in the open binary file
    ``f`` (``length`` bytes; the rest of the file when None), in archive
    order; starts are offsets in ``f``.

    A truncated tar, one whose member runs past its end, or one that is no
    tar at all raises :class:`InputError` naming ``path``. Links and other
    non-regular members with data are refused: an index reads bytes in
    place, and a link has none.
    """
    if length is None:
        length = os.fstat(f.fileno()).st_size - start
    window = _Window(f, start, length)
    try:
        tar = tarfile.open(fileobj=window, mode='r:')
    except tarfile.ReadError as e:
        raise InputError('archive {}: not a tar ({})'.format(path, e))
    while True:
        try:
            info = tar.next()
        except tarfile.ReadError as e:
            raise InputError('archive {}: a damaged header at byte {} ({})'
                             .format(path, start + tar.offset, e))
        if info is None:
            break
        tar.members = []  # one header at a time: ImageNet has 1.28M
        if info.isdir():
            continue
        if not info.isreg():
            raise InputError('archive {}: member {} is a {}, not a regular '
                             'file'.format(path, info.name, _kind(info)))
        if info.offset_data + info.size > length:
            raise InputError('archive {}: truncated: member {} ends at byte '
                             '{}, past the end ({})'.format(
                                 path, info.name, start + info.offset_data +
                                 info.size, start + length))
        yield TarMember(info.name, start + info.offset_data, info.size)
    end = window.pread(_BLOCK, tar.offset)
    if end != bytes(_BLOCK):
        raise InputError('archive {}: truncated at byte {} (no end-of-archive '
                         'block)'.format(path, start + tar.offset))


def _kind(info):
    return ('symbolic link' if info.issym() else 'hard link' if info.islnk()
            else 'device or FIFO')


class _Window(object):
    """Bytes ``[start, start + length)`` of ``f`` as a file of their own,
    for ``tarfile``: it seeks, tells and reads, nothing more."""

    def __init__(self, f, start, length):
        self._fd, self._start, self._length = f.fileno(), start, length
        self._position = 0

    def read(self, size=-1):
        if size is None or size < 0:
            size = self._length - self._position
        data = self.pread(size, self._position)
        self._position += len(data)
        return data

    def pread(self, size, position):
        size = max(0, min(size, self._length - position))
        return os.pread(self._fd, size, self._start + position)

    def seek(self, position, whence=0):
        self._position = position + (
            0 if whence == 0 else self._position if whence == 1
            else self._length)
        return self._position

    def tell(self):
        return self._position

"""Bounded reads of .npz archives and .npy files.

NumPy's ``numpy.load`` and Chainer's ``load_npz`` decompress a member
whole before anything looks at it: a deflated 1 GiB member in a 1 MiB file
takes gigabytes. Here each member's .npy header is read first, with NumPy's
own reader, from at most :data:`HEADER_BYTES` of the member, and checked: a
plain dtype (never Python objects) and a payload of exactly the bytes the
zip entry holds, compressed at most :data:`MAX_RATIO` to one. Only then may
its caller check the shape and dtype against what it expects, and read the
payload (``numpy.lib.format.read_array``, never unpickling). Errors are
:class:`InputError` naming the file and the member; a zip that is damaged
raises zipfile's and zlib's own errors, as ``zipfile`` does.
"""
import collections
import io
import math
import os
import zipfile
import zlib

import numpy

from largebatch.errors import InputError

#: The most bytes of a member its magic string and header may take (NumPy
#: refuses headers above 10000 characters).
HEADER_BYTES = 1 << 16
#: The most a member may be compressed, uncompressed size to compressed
#: size; deflate reaches 1032 only on runs of one byte.
MAX_RATIO = 1000
#: Members of at most this many bytes are not held to :data:`MAX_RATIO`.
TINY = 1 << 20
#: The dtype kinds read: booleans, integers, floats, complex, strings.
KINDS = 'biufcSU'

#: The header reader of each .npy format version: 3.0 is 2.0's layout with
#: a utf-8 header, which only structured dtypes (never read) need.
_HEADER_READERS = {(1, 0): numpy.lib.format.read_array_header_1_0,
                   (2, 0): numpy.lib.format.read_array_header_2_0,
                   (3, 0): numpy.lib.format.read_array_header_2_0}


class Header(collections.namedtuple('Header', 'shape dtype offset')):
    """A .npy header: the array's shape and dtype, and the offset of its
    payload in the member."""

    @property
    def nbytes(self):
        return math.prod(self.shape) * self.dtype.itemsize


def read_header(stream, where):
    """The :class:`Header` at the start of ``stream``, read from at most
    :data:`HEADER_BYTES` of it; ``where`` (the file, or the file and the
    member) names the errors."""
    head = io.BytesIO(stream.read(HEADER_BYTES))
    try:
        version = numpy.lib.format.read_magic(head)
        if version not in _HEADER_READERS:
            raise ValueError('.npy format version {}.{}, this code reads '
                             '1.0 to 3.0'.format(*version))
        shape, _, dtype = _HEADER_READERS[version](head)
    except ValueError as e:  # NumPy's: bad magic, short or unparsable header
        raise InputError('{}: not a .npy array ({})'.format(
            where, str(e).splitlines()[0])) from None
    if dtype.hasobject:
        raise InputError('{} holds Python objects, which are never loaded'
                         .format(where))
    if dtype.kind not in KINDS or dtype.fields:
        raise InputError('{} is of dtype {}, expected numbers or strings'
                         .format(where, dtype))
    if any(n < 0 for n in shape):
        raise InputError('{}: not a .npy array (shape {})'.format(
            where, shape))
    return Header(shape, dtype, head.tell())


def check_size(header, size, where):
    """:class:`InputError` unless ``header`` declares the ``size`` bytes
    that follow it."""
    if header.nbytes != size - header.offset:
        raise InputError(
            '{} declares shape {} of {} ({} bytes), the file holds {} bytes '
            'after its header'.format(where, header.shape, header.dtype,
                                      header.nbytes, size - header.offset))


def _read_payload(stream):
    """The array of ``stream`` (at its start), whose header is checked."""
    array = numpy.lib.format.read_array(stream, allow_pickle=False)
    stream.read(1)  # at the end of a zip member: zipfile checks its CRC
    return array


class _Closing(object):
    """``with`` closes it (:meth:`close`)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class NpyFile(_Closing):
    """A .npy file whose :attr:`header` is read and checked (against the
    file's size) when it is opened; :meth:`read` reads the array."""

    def __init__(self, path):
        self.path = path
        self._file = open(path, 'rb')
        try:
            self.header = read_header(self._file, path)
            check_size(self.header, os.fstat(self._file.fileno()).st_size,
                       path)
        except BaseException:
            self._file.close()
            raise

    def read(self):
        self._file.seek(0)
        try:
            return _read_payload(self._file)
        except ValueError as e:  # shorter than its size when it was opened
            raise InputError('{}: not a .npy array ({})'.format(
                self.path, str(e).splitlines()[0])) from None

    def close(self):
        self._file.close()


def _read_through(archive, info):
    """Read member ``info`` of the zip ``archive`` a block at a time, so
    that zipfile checks its CRC (BadZipFile or zlib's error if it fails)."""
    with archive.open(info) as member:
        while member.read(1 << 20):
            pass


def fails_its_crc(data):
    """Whether a member of the .npz archive ``data`` (bytes) fails its
    CRC-32: a header refused by :class:`NpzFile` may be one a flipped bit
    changed, and then the file is damaged, not crafted. Members above
    :data:`MAX_RATIO` are not read through."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                if info.file_size <= max(TINY, MAX_RATIO * info.compress_size):
                    _read_through(archive, info)
    except (zipfile.BadZipFile, EOFError, zlib.error):
        return True
    return False


class NpzFile(_Closing):
    """An .npz archive (``file``: its path or an open binary file; ``path``
    names it) whose members' headers are read and checked when it is
    opened. Like NumPy's ``NpzFile``: ``files``, ``in``, ``[name]`` (the
    array), never unpickled; :meth:`header` gives a member's header before
    its payload is read."""

    def __init__(self, path, file=None):
        self.path = path
        self.zip = zipfile.ZipFile(path if file is None else file)
        try:
            self._members = dict(self._check(info)
                                 for info in self.zip.infolist())
        except BaseException:
            self.zip.close()
            raise

    def _check(self, info):
        if not info.filename.endswith('.npy'):
            raise InputError('{}: {} is not an .npy member'.format(
                self.path, info.filename))
        name = info.filename[:-len('.npy')]
        where = '{}: {}'.format(self.path, name)
        if info.file_size > max(TINY, MAX_RATIO * info.compress_size):
            raise InputError(
                '{} is compressed {:.0f} to one ({} bytes in {}), above the '
                '{} to one this reader takes'.format(
                    where, info.file_size / max(info.compress_size, 1),
                    info.file_size, info.compress_size, MAX_RATIO))
        with self.zip.open(info) as member:
            header = read_header(member, where)
        check_size(header, info.file_size, where)
        return name, (info, header)

    @property
    def files(self):
        return list(self._members)

    def __contains__(self, name):
        return name in self._members

    def header(self, name):
        """The checked :class:`Header` of member ``name``."""
        return self._members[name][1]

    def __getitem__(self, name):
        with self.zip.open(self._members[name][0]) as member:
            return _read_payload(member)

    def verify(self):
        """Read every member through, a block at a time, so that zipfile
        checks its CRC: BadZipFile (or zlib's error) for a damaged one."""
        for info, _ in self._members.values():
            _read_through(self.zip, info)

    def close(self):
        self.zip.close()

"""The ``.index`` file: where each image of an archive lies, and its label.

Layout (little-endian): the 8 bytes ``IMAGEIDX``, a ``uint32`` version (1),
a ``uint32`` header length, the header (JSON, padded with spaces to a
multiple of 8 bytes), then the arrays of an
:class:`~image_data.image_index.ImageIndex` of records, in the order and
alignment its shared-memory segment holds them: name offsets (``int64``,
n + 1), data starts and lengths (``int64``), labels (``int32``), CRC32C
(``uint32``), the names' bytes. A reader allocates the segment and reads
the arrays straight into it.

The header names the archive (its absolute path, size and modification
time, in ns), its kind (``tar`` or ``recordio``), whether the CRC32C are
filled, the record and name-byte counts and the class names. Everything is
checked before the index is used: the file's size against the counts, the
offsets, the labels against the classes, each record against the archive's
size, and the archive against its recorded size and time. Nothing in the
file is code.
"""
import json
import os
import struct

import numpy

from largebatch import input_files
from largebatch.errors import InputError
from image_data.archive_members import Archive
from image_data.image_index import ImageIndex
from image_data.image_index import segment_fields

MAGIC = b'IMAGEIDX'
VERSION = 1
#: Headers are small (ImageNet's: 12 KB of class names); a larger one is
#: not an index.
HEADER_LIMIT = 16 << 20
KINDS = ('tar', 'recordio')
_PREFIX = struct.Struct('<8sII')
_HEADER = {'kind': str, 'archive': str, 'size': int, 'mtime_ns': int,
           'checksums': bool, 'records': int, 'name_bytes': int,
           'classes': list}


def is_index(path):
    """Whether ``path`` names an index file (by its extension)."""
    return path.endswith('.index')


def write_index(f, kind, archive, classes, names, labels, starts, lengths,
                crc32c):
    """Write the index of ``archive`` (an :class:`Archive`) to the binary
    file ``f``: record ``i`` is image ``names[i]`` of label ``labels[i]``,
    ``lengths[i]`` bytes at ``starts[i]``."""
    encoded = [os.fsencode(name) for name in names]
    arrays = {'offsets': numpy.cumsum([0] + [len(e) for e in encoded]),
              'labels': labels, 'starts': starts, 'lengths': lengths,
              'crc32c': crc32c, 'blob': b''.join(encoded)}
    header = json.dumps({
        'kind': kind, 'archive': archive.path, 'size': archive.size,
        'mtime_ns': archive.mtime_ns, 'checksums': archive.checksums,
        'records': len(names), 'name_bytes': len(arrays['blob']),
        'classes': list(classes)}).encode('utf-8')
    header += b' ' * (-len(header) % 8)
    f.write(_PREFIX.pack(MAGIC, VERSION, len(header)))
    f.write(header)
    for field, dtype, _ in segment_fields(len(names), len(arrays['blob']),
                                          records=True):
        array = numpy.frombuffer(arrays[field], numpy.uint8) \
            if field == 'blob' else numpy.asarray(arrays[field], dtype)
        f.write(array.astype(array.dtype.newbyteorder('<')).tobytes())


def read_header(path):
    """The checked header of the index at ``path``."""
    with _open(path) as f:
        return _read_header(path, f)[0]


def _open(path):
    input_files.check_regular(path, 'index')
    try:
        return open(path, 'rb')
    except OSError as e:
        raise InputError('index {}: cannot be read ({})'.format(
            path, e.strerror))


def _read_header(path, f):
    size = os.fstat(f.fileno()).st_size
    prefix = f.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size or prefix[:8] != MAGIC:
        raise InputError('index {}: not an image index (written by python '
                         '-m image_data.archives)'.format(path))
    _, version, length = _PREFIX.unpack(prefix)
    if version != VERSION:
        raise InputError('index {}: version {}; this reader reads version {}'
                         .format(path, version, VERSION))
    if length > min(HEADER_LIMIT, size - _PREFIX.size):
        raise InputError('index {}: truncated (a header of {} bytes in a '
                         'file of {})'.format(path, length, size))
    try:
        header = json.loads(f.read(length).decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError('index {}: a damaged header ({})'.format(path, e))
    if not isinstance(header, dict) or any(
            type(header.get(key)) is not kind for key, kind in
            _HEADER.items()) or header['kind'] not in KINDS or not all(
                isinstance(c, str) for c in header['classes']) or min(
                    header['records'], header['name_bytes']) < 0:
        raise InputError('index {}: a damaged header (expected {})'.format(
            path, ', '.join(_HEADER)))
    return header, _PREFIX.size + length, size


def read_index(path):
    """``(index, class names)`` of the index file at ``path``: an
    :class:`ImageIndex` whose root is the checked :class:`Archive`.

    The archive is the one the header names; where that path is gone, the
    file of the same name beside the index (an index copied with its
    archive, to a node's local disk, say).
    """
    with _open(path) as f:
        header, start, size = _read_header(path, f)
        n, blob_size = header['records'], header['name_bytes']
        archive = _find_archive(path, header)
        index = ImageIndex.allocate(archive, n, blob_size, records=True)
        expected = start + index.nbytes
        if size != expected:
            raise InputError('index {}: {} bytes; its {} records need {}'
                             .format(path, size, n, expected))
        for array in index.buffers():
            if f.readinto(memoryview(array).cast('B')) != array.nbytes:
                raise InputError('index {}: truncated while read'.format(
                    path))
    index.freeze()
    _check_records(path, index, len(header['classes']), archive.size)
    return index, header['classes']


def _find_archive(path, header):
    recorded = header['archive']
    beside = os.path.join(os.path.dirname(path),
                          os.path.basename(recorded))
    where = recorded if os.path.exists(recorded) else beside
    try:
        status = os.stat(where)
    except OSError:
        raise InputError('index {}: its archive {} is gone (nor is {} beside '
                         'the index)'.format(path, recorded, beside))
    archive = Archive(where, header['size'], header['mtime_ns'],
                      header['checksums'])
    archive.check(status)
    return archive


def _check_records(path, index, n_class, archive_size):
    segment = index.segment
    offsets = segment.offsets
    problem = None
    if offsets[0] != 0 or offsets[-1] != segment.blob_size or (
            numpy.diff(offsets) <= 0).any():
        problem = 'the names\' offsets are not increasing'
    elif len(segment.labels) and not (
            0 <= segment.labels.min() <= segment.labels.max() < n_class):
        problem = 'a label is outside the {} classes'.format(n_class)
    elif len(segment.starts) and (
            segment.starts.min() < 0 or segment.lengths.min() < 0 or
            (segment.starts + segment.lengths).max() > archive_size):
        problem = 'a record lies outside the archive'
    if problem:
        raise InputError('index {}: damaged ({})'.format(path, problem))

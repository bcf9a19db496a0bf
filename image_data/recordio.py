"""The images of an MXNet RecordIO file (``im2rec``'s ``.rec``), in place.

A record is a ``uint32`` magic (0xced7230a), a ``uint32`` whose low 29 bits
are the payload's length and whose high 3 a continuation flag, and the
payload, padded to 4 bytes. ``im2rec`` writes a payload as an ``IRHeader``
(``uint32`` flag, ``float32`` label, two ``uint64`` ids), ``flag`` more
``float32`` labels when flag > 0, then the encoded image. Only the headers
are read: ``.rec`` + ``.idx`` pairs need no ``.idx`` here, since the walk
finds every record's offset itself.
"""
import collections
import os
import struct

from largebatch.errors import InputError

MAGIC = 0xced7230a
_RECORD = struct.Struct('<II')
_IMAGE_HEADER = struct.Struct('<IfQQ')
_LENGTH_BITS = (1 << 29) - 1

#: An image record: its id, label, and where its encoded image lies.
Record = collections.namedtuple('Record', 'id label start length')


def records(path, f):
    """The image records of the RecordIO file ``f`` (at ``path``), in file
    order; :class:`InputError` for anything else."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    position = 0
    while position < size:
        head = os.pread(fd, _RECORD.size + _IMAGE_HEADER.size + 4, position)
        if len(head) < _RECORD.size + _IMAGE_HEADER.size:
            raise InputError('RecordIO {}: truncated at byte {}'.format(
                path, position))
        magic, word = _RECORD.unpack_from(head)
        length, continued = word & _LENGTH_BITS, word >> 29
        if magic != MAGIC:
            raise InputError('RecordIO {}: no record at byte {} (magic {:#x})'
                             .format(path, position, magic))
        if continued:
            raise InputError('RecordIO {}: the record at byte {} is split in '
                             'parts; the index reads whole image records'
                             .format(path, position))
        flag, label, record_id, _ = _IMAGE_HEADER.unpack_from(head,
                                                              _RECORD.size)
        if flag == 1:
            label, = struct.unpack_from('<f', head, _RECORD.size +
                                        _IMAGE_HEADER.size)
        header = _IMAGE_HEADER.size + 4 * flag
        start = position + _RECORD.size
        if flag > 1 or length < header or start + length > size:
            raise InputError(
                'RecordIO {}: the record at byte {} is {}'.format(
                    path, position, 'a multi-label record' if flag > 1
                    else 'truncated' if start + length > size
                    else 'shorter than its header'))
        if not float(label).is_integer() or label < 0:
            raise InputError('RecordIO {}: the record at byte {} has label '
                             '{}; expected a class number'.format(
                                 path, position, label))
        yield Record(record_id, int(label), start + header, length - header)
        position = start + length + (-length % 4)

import struct

import pytest

from largebatch.errors import InputError
from image_data import recordio


def record(label, record_id, image, labels=None):
    """A record as MXNet's im2rec packs it (recordio.pack + IRHeader)."""
    flag = len(labels) if labels else 0
    payload = struct.pack('<IfQQ', flag, 0 if labels else label, record_id,
                          0) + b''.join(struct.pack('<f', x)
                                        for x in labels or []) + image
    return struct.pack('<II', recordio.MAGIC, len(payload)) + payload + \
        b'\0' * (-len(payload) % 4)


def walk(tmp_path, data):
    path = tmp_path / 'train.rec'
    path.write_bytes(data)
    with open(str(path), 'rb') as f:
        return list(recordio.records(str(path), f)), data


def test_records_point_at_their_images(tmp_path):
    found, data = walk(tmp_path, record(3, 10, b'JPEG1') +
                       record(0, 11, b'JPEG-two', labels=[7.0]) +
                       record(1, 12, b'J3'))
    assert [(r.id, r.label) for r in found] == [(10, 3), (11, 7), (12, 1)]
    assert [data[r.start:r.start + r.length] for r in found] == [
        b'JPEG1', b'JPEG-two', b'J3']


@pytest.mark.parametrize('data, expected', [
    (record(1, 1, b'abc')[:-4], 'truncated'),
    (b'\0' * 40, 'no record at byte 0'),
    (record(0, 1, b'x', labels=[1.0, 2.0]), 'a multi-label record'),
    (record(1.5, 1, b'x'), 'has label 1.5'),
    (struct.pack('<II', recordio.MAGIC, 5 | 1 << 29) + b'\0' * 40,
     'split in parts'),
])
def test_bad_records_are_named(tmp_path, data, expected):
    with pytest.raises(InputError, match=expected):
        walk(tmp_path, data)

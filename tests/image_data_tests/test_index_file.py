"""The .index file and the archive members it gives."""
import io
import json
import os
import struct

import pytest

from largebatch.errors import InputError
from image_data import archive_members
from image_data import archives
from image_data import decoding
from image_data import index_file
from test_recordio import record


def class_tar(path, files):
    import tarfile
    with tarfile.open(path, 'w') as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def indexed(tmp_path):
    """A tar of class folders indexed with checksums: ``(index path,
    archive path)``."""
    archive = str(tmp_path / 'train.tar')
    class_tar(archive, [('a/1.jpg', b'one'), ('b/2.jpg', b'two!'),
                        ('a/0.jpg', b'zero')])
    archives.index_archives(archive, None, None, str(tmp_path / 'idx'),
                            checksums=True,
                            progress=archives.Progress(io.StringIO()))
    return str(tmp_path / 'idx' / 'train.index'), archive


def test_round_trip(indexed):
    index, classes = index_file.read_index(indexed[0])
    assert classes == ['a', 'b']
    assert [(str(m), label, m.read()) for m, label in index] == [
        (indexed[1] + ':a/0.jpg', 0, b'zero'),
        (indexed[1] + ':a/1.jpg', 0, b'one'),
        (indexed[1] + ':b/2.jpg', 1, b'two!')]
    assert index[1:][0][0].name == 'a/1.jpg'
    assert index_file.read_header(indexed[0])['kind'] == 'tar'


def test_an_archive_moved_with_its_index_is_found_beside_it(
        indexed, tmp_path):
    moved = tmp_path / 'moved'
    moved.mkdir()
    for path in indexed:
        os.rename(path, str(moved / os.path.basename(path)))
    index, _ = index_file.read_index(str(moved / 'train.index'))
    assert index[0][0].read() == b'zero'
    os.remove(str(moved / 'train.tar'))
    with pytest.raises(InputError, match='its archive .* is gone'):
        index_file.read_index(str(moved / 'train.index'))


def test_an_archive_changed_since_it_was_indexed(indexed):
    status = os.stat(indexed[1])
    os.utime(indexed[1], ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))
    with pytest.raises(InputError, match='changed since it was indexed'):
        index_file.read_index(indexed[0])


def test_an_archive_changed_after_the_index_was_read(indexed):
    index, _ = index_file.read_index(indexed[0])
    with open(indexed[1], 'r+b') as f:
        f.truncate(512)
    archive_members._open.clear()
    with pytest.raises(InputError, match='changed since it was indexed'):
        index[0][0].read()


def test_crc_mismatch_is_a_bad_image_named(indexed):
    index, _ = index_file.read_index(indexed[0])
    member = index[2][0]
    status = os.stat(indexed[1])
    with open(indexed[1], 'r+b') as f:
        os.pwrite(f.fileno(), b'TWO!', member.start)
    os.utime(indexed[1], ns=(status.st_atime_ns, status.st_mtime_ns))
    archive_members._open.clear()
    with pytest.raises(decoding.UndecodableImageError) as error:
        member.read()
    assert str(error.value).startswith('image {}:b/2.jpg: CRC32C '.format(
        indexed[1]))


def test_one_open_per_process(indexed, monkeypatch):
    index, _ = index_file.read_index(indexed[0])
    archive_members._open.clear()
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, 'open', lambda path, *a: opened.append(path) or
                        real_open(path, *a))
    for _ in range(3):
        assert [m.read() for m, _ in index] == [b'zero', b'one', b'two!']
    assert opened == [indexed[1]]


def test_a_fifo_in_the_archives_place_does_not_hang(indexed):
    index, _ = index_file.read_index(indexed[0])
    os.remove(indexed[1])
    os.mkfifo(indexed[1])
    archive_members._open.clear()
    with pytest.raises(InputError, match='not a regular file'):
        index[0][0].read()


def damage(path, offset, data):
    with open(path, 'r+b') as f:
        f.seek(offset)
        f.write(data)


def header_end(path):
    with open(path, 'rb') as f:
        return 16 + struct.unpack('<8sII', f.read(16))[2]


@pytest.mark.parametrize('change, expected', [
    (lambda p: damage(p, 0, b'NOTINDEX'), 'not an image index'),
    (lambda p: damage(p, 8, struct.pack('<I', 2)), 'version 2'),
    (lambda p: damage(p, 12, struct.pack('<I', 1 << 30)), 'truncated'),
    (lambda p: damage(p, 16, b'{"kind": 5'), 'a damaged header'),
    (lambda p: open(p, 'ab').write(b'x'), 'records need'),
    (lambda p: damage(p, header_end(p) + 8, struct.pack('<q', 99)),
     'offsets are not increasing'),
    (lambda p: damage(p, header_end(p) + 8 * 4 + 24 * 2,
                      struct.pack('<i', 7)), 'a label is outside'),
    (lambda p: damage(p, header_end(p) + 8 * 4 + 8,
                      struct.pack('<q', 1 << 40)), 'outside the archive'),
])
def test_damaged_index_is_named(indexed, change, expected):
    change(indexed[0])
    with pytest.raises(InputError) as error:
        index_file.read_index(indexed[0])
    assert str(error.value).startswith('index {}: '.format(indexed[0]))
    assert expected in str(error.value)


def test_header_claims_are_checked(indexed):
    with open(indexed[0], 'rb') as f:
        data = f.read()
    end = header_end(indexed[0])
    header = json.loads(data[16:end])
    header['classes'] = [1, 2]
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    with open(indexed[0], 'wb') as f:
        f.write(struct.pack('<8sII', b'IMAGEIDX', 1, len(text)) + text +
                data[end:])
    with pytest.raises(InputError, match='a damaged header'):
        index_file.read_index(indexed[0])


def test_recordio_is_indexed_in_place(tmp_path):
    rec = tmp_path / 'train.rec'
    rec.write_bytes(record(2, 5, b'five') + record(0, 6, b'six'))
    archives.index_archives(str(rec), None, None, str(tmp_path / 'idx'),
                            progress=archives.Progress(io.StringIO()))
    index, classes = index_file.read_index(str(tmp_path / 'idx' /
                                               'train.index'))
    assert classes == ['0', '1', '2']
    assert [(m.name, label, m.read()) for m, label in index] == [
        ('000000006', 0, b'six'), ('000000005', 2, b'five')]

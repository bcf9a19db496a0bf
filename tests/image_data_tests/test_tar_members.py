import io
import os
import tarfile

import pytest

from largebatch.errors import InputError
from image_data import tar_members


def tar_bytes(files, fmt=tarfile.GNU_FORMAT):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode='w', format=fmt) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize('fmt', [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                 tarfile.PAX_FORMAT])
def test_members_of_a_tar_in_a_tar_start_in_the_outer_file(tmp_path, fmt):
    long = 'x' * 150 if fmt != tarfile.USTAR_FORMAT else 'x' * 90
    inner = tar_bytes([('a.JPEG', b'alpha'), (long + '.JPEG', b'b' * 700)],
                      fmt)
    path = tmp_path / 'outer.tar'
    path.write_bytes(tar_bytes([('first.txt', b'1' * 1000),
                                ('n01.tar', inner)], fmt))
    with open(str(path), 'rb') as f:
        outer = list(tar_members.members('outer', f))
        assert [m.name for m in outer] == ['first.txt', 'n01.tar']
        found = list(tar_members.members('inner', f, outer[1].start,
                                         outer[1].length))
        assert [m.name for m in found] == ['a.JPEG', long + '.JPEG']
        for member, data in zip(found, (b'alpha', b'b' * 700)):
            assert os.pread(f.fileno(), member.length, member.start) == data


def test_directories_are_passed_over_and_fifos_refused(tmp_path):
    path = str(tmp_path / 't.tar')
    with tarfile.open(path, 'w') as tar:
        tar.addfile(tarfile.TarInfo('d/'), None)
        info = tarfile.TarInfo('d/pipe.jpg')
        info.type = tarfile.FIFOTYPE
        tar.addfile(info)
    with open(path, 'rb') as f, pytest.raises(
            InputError, match='d/pipe.jpg is a device or FIFO'):
        list(tar_members.members(path, f))


def test_not_a_tar(tmp_path):
    path = tmp_path / 'x.tar'
    path.write_bytes(b'\x01' * 2048)
    with open(str(path), 'rb') as f, pytest.raises(InputError,
                                                   match='not a tar'):
        list(tar_members.members(str(path), f))


def test_member_past_the_end_of_a_tar_in_a_tar(tmp_path):
    inner = tar_bytes([('a.JPEG', b'a' * 2000)])
    path = tmp_path / 'outer.tar'
    path.write_bytes(tar_bytes([('n01.tar', inner)]))
    with open(str(path), 'rb') as f:
        outer, = tar_members.members('outer', f)
        with pytest.raises(InputError, match='truncated: member a.JPEG'):
            list(tar_members.members('inner', f, outer.start, 1024))


@pytest.mark.parametrize('compress, kind', [
    ('gzip', 'gzip'), ('bz2', 'bzip2'), ('lzma', 'xz')])
def test_compressed_tars_are_named(tmp_path, compress, kind):
    module = __import__(compress)
    path = tmp_path / 'x.tar.z'
    path.write_bytes(module.compress(tar_bytes([('a', b'1')])))
    with open(str(path), 'rb') as f, pytest.raises(
            InputError, match=r'compressed \({}\)'.format(kind)):
        tar_members.check_uncompressed(str(path), f)

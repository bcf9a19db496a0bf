"""Image reads that are bounded and cannot block: a cap on the bytes, a
regular file only, the decoder chosen by the first bytes, every failure a
bad image that names the file."""
import os
import struct

import pytest
from PIL import Image

from image_data import decoding
from image_data import transforms
from image_data.archive_members import Archive


def jpeg(path):
    Image.new('RGB', (50, 40), (1, 2, 3)).save(path, 'JPEG')
    return path


@pytest.mark.parametrize('decoder', ['pillow', 'simplejpeg'])
def test_an_image_above_the_cap_is_not_read(tmp_path, decoder):
    path = str(tmp_path / 'huge.JPEG')
    with open(jpeg(path), 'r+b') as f:
        f.truncate(3 << 20)  # sparse: nothing to read
    assert decoding.load_rgb(path, 32, decoder, limit=4 << 20).shape[2] == 3
    with pytest.raises(decoding.UndecodableImageError) as error:
        decoding.load_rgb(path, 32, decoder, limit=2 << 20)
    assert str(error.value) == ('image {}: 3145728 bytes, above the cap of '
                                '2 MiB on an image'.format(path))


def test_a_link_to_a_device_is_not_read(tmp_path):
    path = str(tmp_path / 'zero.JPEG')
    os.symlink('/dev/zero', path)
    with pytest.raises(decoding.UndecodableImageError,
                       match='zero.JPEG: not a regular file'):
        decoding.load_rgb(path, 32)


def test_a_fifo_does_not_block(tmp_path):
    path = str(tmp_path / 'pipe.jpg')
    os.mkfifo(path)
    with pytest.raises(decoding.UndecodableImageError,
                       match='pipe.jpg: not a regular file'):
        decoding.load_rgb(path, 32)


@pytest.mark.parametrize('data, expected', [
    (b'hello, world', "no image format starts with b'hello, w'"),
    (b'II*\x00' + struct.pack('<I', 8) + b'\xff' * 64, ''),
    (b'\x89PNG\r\n\x1a\n' + b'\x00' * 64, ''),
    (b'GIF89a' + b'\xff' * 30, ''),
    (b'BM' + b'\xff' * 60, ''),
    (b'RIFF\x10\x00\x00\x00WEBPVP8 ' + b'\xff' * 20, ''),
])
def test_every_decode_failure_is_a_bad_image_named(tmp_path, data, expected):
    path = str(tmp_path / 'bad.JPEG')
    with open(path, 'wb') as f:
        f.write(data)
    for decoder in ('pillow', 'simplejpeg'):
        with pytest.raises(decoding.UndecodableImageError) as error:
            decoding.load_rgb(path, 32, decoder)
        assert str(error.value).startswith(
            'image {}: cannot be decoded ('.format(path))
        assert expected in str(error.value)


def test_a_png_named_jpeg_is_decoded_by_its_first_bytes(tmp_path):
    path = str(tmp_path / 'png.JPEG')
    Image.new('RGB', (50, 40), (4, 5, 6)).save(path, 'PNG')
    assert (decoding.load_rgb(path, 32) == (4, 5, 6)).all()


def test_the_transform_skips_and_caps(tmp_path):
    path = str(tmp_path / 'big.JPEG')
    with open(jpeg(path), 'r+b') as f:
        f.truncate(2 << 20)
    mean = transforms.IMAGENET_MEAN
    skipping = transforms.ValTransform(32, mean, 36, skip_bad_images=True,
                                       max_image_bytes=1 << 20)
    assert skipping((path, 0)) is None
    assert transforms.ValTransform(32, mean, 36, max_image_bytes=4 << 20)(
        (path, 0))[0].shape == (3, 32, 32)
    stopping = transforms.ValTransform(32, mean, 36, max_image_bytes=1 << 20)
    with pytest.raises(decoding.UndecodableImageError, match='above the cap'):
        stopping((path, 0))


def test_an_archive_member_above_the_cap_is_not_read(tmp_path):
    archive = Archive(str(tmp_path / 'never-opened.tar'), 10 << 20, 0)
    member = archive.member('a/x.JPEG', 512, 3 << 20, 0)
    with pytest.raises(decoding.UndecodableImageError) as error:
        decoding.load_rgb(member, 32, limit=2 << 20)
    assert str(error.value).startswith('image {}:a/x.JPEG: 3145728 bytes'
                                       .format(archive.path))
    assert not os.path.exists(archive.path)

import os
import subprocess
import sys

import numpy
import pytest
from PIL import Image

from benchmarks.photos import write_photos
from conftest import REPO
from image_data import decoding
from largebatch import errors


def write_image(path, size, mode, color):
    Image.new(mode, size, color).save(path)


@pytest.mark.parametrize('mode', ['L', 'P', 'CMYK', 'RGBA', 'RGB'])
def test_any_image_mode_decodes_to_rgb(tmp_path, mode):
    path = str(tmp_path / 'img.png')
    if mode == 'CMYK':
        path = str(tmp_path / 'img.jpg')
    write_image(path, (50, 40), mode, 7 if mode in 'LP' else None)
    image = decoding.load_square(path, 36)
    assert image.shape == (36, 36, 3) and image.dtype == numpy.uint8


def truncated_jpeg(tmp_path):
    """A JPEG cut after its first 100 bytes."""
    path = str(tmp_path / 'cut.jpg')
    write_image(path, (50, 40), 'RGB', (9, 9, 9))
    with open(path, 'r+b') as f:
        f.truncate(100)
    return path


def test_a_truncated_image_is_an_error_naming_the_file(tmp_path):
    path = truncated_jpeg(tmp_path)
    with pytest.raises(decoding.UndecodableImageError) as e:
        decoding.load_square(path, 36)
    message = str(e.value)
    assert message.startswith('image {}: cannot be decoded ('.format(path))
    assert '--' not in message and '\n' not in message


needs_simplejpeg = pytest.mark.skipif(
    decoding.simplejpeg is None,
    reason='simplejpeg (the fast-decode extra) is not installed')


@pytest.fixture(scope='module')
def photos(tmp_path_factory):
    return write_photos(str(tmp_path_factory.mktemp('photos')))


@needs_simplejpeg
@pytest.mark.parametrize('side', [256, 180, 60, 30])  # DCT scale 1 to 1/8
def test_simplejpeg_decodes_pillows_pixels(photos, side):
    for path in photos:
        pixels = decoding.load_rgb(path, side, 'simplejpeg')
        numpy.testing.assert_array_equal(
            pixels, decoding.load_rgb(path, side, 'pillow'))
        assert min(pixels.shape[:2]) >= side


@needs_simplejpeg
@pytest.mark.parametrize('mode, name', [
    ('CMYK', 'img.jpg'), ('L', 'img.jpg'), ('RGBA', 'img.png')])
def test_other_images_decode_as_with_pillow(photos, tmp_path, mode, name):
    path = str(tmp_path / name)
    with Image.open(photos[0]) as image:
        image.convert(mode).save(path)
    for load in (decoding.load_rgb, decoding.load_square):
        numpy.testing.assert_array_equal(load(path, 100, 'simplejpeg'),
                                         load(path, 100, 'pillow'))


@pytest.mark.parametrize('decoder', ['pillow', 'simplejpeg'])
def test_a_missing_file_is_an_error_naming_it(tmp_path, decoder):
    if decoder == 'simplejpeg' and decoding.simplejpeg is None:
        pytest.skip('simplejpeg is not installed')
    path = str(tmp_path / 'gone.jpg')
    with pytest.raises(decoding.UndecodableImageError, match='gone.jpg'):
        decoding.load_rgb(path, 36, decoder)


@needs_simplejpeg
def test_a_truncated_jpeg_is_pillows_error_with_simplejpeg_too(tmp_path):
    path = truncated_jpeg(tmp_path)
    with pytest.raises(decoding.UndecodableImageError) as pillow:
        decoding.load_rgb(path, 36, 'pillow')
    with pytest.raises(decoding.UndecodableImageError) as fast:
        decoding.load_rgb(path, 36, 'simplejpeg')
    assert str(fast.value) == str(pillow.value)


def test_auto_is_simplejpeg_where_installed_else_pillow(monkeypatch):
    assert decoding.choose_decoder('pillow') == 'pillow'
    assert decoding.choose_decoder('auto') == (
        'simplejpeg' if decoding.simplejpeg else 'pillow')
    monkeypatch.setattr(decoding, 'simplejpeg', None)
    assert decoding.choose_decoder('auto') == 'pillow'


def test_an_unknown_decoder_is_a_parameter_error():
    with pytest.raises(errors.ParameterError) as e:
        decoding.choose_decoder('turbo')
    assert str(e.value) == "decoder must be auto or pillow, got 'turbo'"


def test_without_simplejpeg_the_transform_decodes_with_pillow(photos):
    """A process where simplejpeg cannot be imported: auto is Pillow."""
    script = (
        "import sys\n"
        "sys.modules['simplejpeg'] = None  # import simplejpeg fails\n"
        "import largebatch.chainer_compat, numpy, image_data\n"
        "mean = image_data.load_mean(None, 256)\n"
        "auto = image_data.TrainTransform(224, mean)\n"
        "pillow = image_data.TrainTransform(224, mean, decoder='pillow')\n"
        "rng = numpy.random.default_rng\n"
        "same = all((auto((p, 0), rng(s))[0] == pillow((p, 0), rng(s))[0])"
        ".all() for p in sys.argv[1:] for s in range(3))\n"
        "print(auto.decoder, same)\n")
    proc = subprocess.run([sys.executable, '-c', script] + photos,
                          capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ['pillow', 'True']

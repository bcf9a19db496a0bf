"""Pixels are what the image holds: 16-bit and float images scaled to 8
bits, EXIF orientation applied, with either decoder."""
import numpy
import pytest
from PIL import Image

from image_data import decoding


@pytest.mark.parametrize('decoder', ['pillow', 'auto'])
def test_a_16_bit_grayscale_png_keeps_its_grays(tmp_path, decoder):
    values = numpy.linspace(0, 65535, 64 * 48).reshape(48, 64).astype(
        numpy.uint16)
    path = str(tmp_path / 'deep.png')
    Image.fromarray(values).save(path)
    pixels = decoding.load_rgb(path, 48, decoding.choose_decoder(decoder))
    assert pixels.shape == (48, 64, 3) and pixels.dtype == numpy.uint8
    expected = numpy.rint(values * (255 / 65535)).astype(numpy.uint8)
    numpy.testing.assert_array_equal(pixels[..., 1], expected)
    assert 100 < pixels.mean() < 155  # not 99.6% white


def test_a_float_tiff_of_0_to_1_is_not_black(tmp_path):
    values = numpy.linspace(0, 1, 32 * 32).reshape(32, 32).astype(
        numpy.float32)
    path = str(tmp_path / 'float.tiff')
    Image.fromarray(values, mode='F').save(path)
    pixels = decoding.load_rgb(path, 32)
    numpy.testing.assert_array_equal(
        pixels[..., 0], numpy.rint(values.astype(numpy.float64) * 255))


@pytest.mark.parametrize('decoder', ['pillow', 'auto'])
def test_exif_orientation_is_applied(tmp_path, decoder):
    rgb = numpy.zeros((40, 80, 3), numpy.uint8)
    rgb[:, :40] = 255  # left half white
    image = Image.fromarray(rgb)
    exif = image.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    path = str(tmp_path / 'rotated.jpg')
    image.save(path, exif=exif, quality=95)
    pixels = decoding.load_rgb(path, 40, decoding.choose_decoder(decoder))
    assert pixels.shape == (80, 40, 3)
    assert pixels[:30].mean() > 200 and pixels[50:].mean() < 50

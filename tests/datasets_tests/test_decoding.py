import numpy
import pytest
from PIL import Image

from datasets import decoding


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


def test_a_truncated_image_is_an_error_naming_the_file(tmp_path):
    path = str(tmp_path / 'cut.jpg')
    write_image(path, (50, 40), 'RGB', (9, 9, 9))
    with open(path, 'r+b') as f:
        f.truncate(100)
    with pytest.raises(decoding.UndecodableImageError) as e:
        decoding.load_square(path, 36)
    message = str(e.value)
    assert message.startswith('image {}: cannot be decoded ('.format(path))
    assert '--' not in message and '\n' not in message

"""Image decoding with Pillow: RGB, resized and centre-cropped to a square."""
import numpy
from PIL import Image

from errors import InputError


class UndecodableImageError(InputError):
    """An image file that Pillow cannot decode; the message names it."""


def load_square(path, side):
    """Decode ``path`` to a ``(side, side, 3)`` uint8 RGB array.

    The shorter side is resized to ``side`` and the longer one centre-cropped,
    as ImageNet images are prepared for a 224 crop out of 256. JPEGs are
    decoded at a reduced DCT scale when they are much larger than needed.
    Grayscale, palette, CMYK and alpha images are converted, not rejected;
    a truncated or corrupt file raises :class:`UndecodableImageError`.
    """
    try:
        return _load_square(path, side)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) \
            as e:
        raise UndecodableImageError('image {}: cannot be decoded ({})'
                                    .format(path, e))


def _load_square(path, side):
    with Image.open(path) as image:
        image.draft('RGB', (side, side))
        image = image.convert('RGB')
        w, h = image.size
        scale = side / min(w, h)
        new_w, new_h = max(side, round(w * scale)), max(side, round(h * scale))
        left, top = (new_w - side) // 2, (new_h - side) // 2
        if (w, h) != (side, side):
            image = image.resize((new_w, new_h), Image.BILINEAR,
                                 box=None).crop(
                (left, top, left + side, top + side))
        return numpy.asarray(image)

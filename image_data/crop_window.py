"""A crop of the resized image, resized from its box in the source alone.

The transforms resize an image's shorter side to ``side``
(:func:`image_data.decoding.resized_size`: ``new_w x new_h``), take the
centre ``side`` square and crop ``crop`` pixels at ``(top, left)`` of it.
Pillow's bilinear filter computes output column ``X`` of the resized image
around ``(X + 0.5) w / new_w`` in the source, over a support of ``w /
new_w`` pixels (likewise for rows), so the crop is the resize of the source
box ``x = X0 w / new_w .. (X0 + crop) w / new_w`` (``X0`` the crop's first
column in the resized image) to ``crop x crop``: the same filter at the
same centres, on ``crop^2`` output pixels instead of ``new_w new_h`` (2.5x
fewer for a 500x375 image resized to 341x256 and cropped to 224). Pillow
takes the box in float32 and recomputes the scale from it, so a few pixels
differ from the whole image's resize by one level. An image that is
enlarged (its shorter side at most ``side``) is resized whole: it is small,
and at the small integer ratios of such images sample centres often fall
exactly on pixel boundaries, where the float32 box moves a filter's window.
"""
import numpy
from PIL import Image

from image_data.decoding import resized_size
from image_data.decoding import square

try:
    from image_data import _resample
except ImportError:  # the extension is optional: Pillow resizes without it
    _resample = None


def source_box(width, height, side, top, left, crop):
    """``(x0, y0, x1, y1)`` in the ``width x height`` source of the ``crop``
    square at ``(top, left)`` of the centre ``side`` square of the resized
    image."""
    new_w, new_h = resized_size(width, height, side)
    x0, y0 = (new_w - side) // 2 + left, (new_h - side) // 2 + top
    return (x0 * width / new_w, y0 * height / new_h,
            (x0 + crop) * width / new_w, (y0 + crop) * height / new_h)


def resize_box(pixels, box, crop):
    """``Image.resize((crop, crop), BILINEAR, box=box)`` of ``(H, W, 3)``
    uint8 ``pixels``, as a ``(crop, crop, 3)`` uint8 array.

    The C loops of ``image_data._resample`` compute Pillow's result bit for
    bit (its fixed point, rounding and pass order) about 3x faster; where
    the extension is not built, Pillow resizes.
    """
    if _resample is None:
        return numpy.asarray(Image.fromarray(pixels).resize(
            (crop, crop), Image.BILINEAR, box=box))
    out = numpy.empty((crop, crop, 3), numpy.uint8)
    _resample.resize_box(numpy.ascontiguousarray(pixels), out, *box)
    return out


def crop_of_resized(pixels, side, top, left, crop):
    """The ``crop`` square at ``(top, left)`` of the centre ``side`` square of
    ``(H, W, 3)`` uint8 ``pixels`` resized: the resize of its box in the
    source, or, for an image that is enlarged, of the whole image."""
    height, width = pixels.shape[:2]
    if min(width, height) <= side:
        return square(pixels, side)[top:top + crop, left:left + crop]
    return resize_box(
        pixels, source_box(width, height, side, top, left, crop), crop)

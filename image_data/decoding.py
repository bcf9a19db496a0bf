"""Image decoding to RGB pixels, with Pillow or with simplejpeg.

JPEGs are decoded at the DCT scale that Pillow's ``draft(mode, (side,
side))`` picks: 1/2, 1/4 or 1/8 when both sides stay at least ``side``,
else in full. simplejpeg (the ``fast-decode`` extra: libjpeg-turbo's
TurboJPEG API) decodes YCbCr and grayscale JPEGs straight into a NumPy
array, with the same libjpeg-turbo settings as Pillow (integer IDCT, fancy
upsampling), and so to the same pixels; other images, and JPEGs it refuses,
go to Pillow, whose verdict on a bad file stands.

Pixels are what the image holds, as torchvision reads them: an EXIF
orientation is applied (JPEGs with EXIF data go to Pillow for it); 16-bit
images (Pillow's modes ``I;16``, ``I;16B``, ``I;16L`` and ``I``, read as
0..65535) are scaled to 8 bits by 255/65535 and rounded; float images
(mode ``F``) whose values stay within 0..1 are scaled by 255, others clipped
to 0..255; one channel becomes three equal ones. Pillow's own conversion
would clip 16-bit values to 255 (a white image) and cast floats of 0..1 to
0 (a black one).
"""
import contextlib
import io
import os
import stat

import numpy
from PIL import Image
from PIL import ImageOps

from largebatch.errors import InputError
from largebatch.errors import ParameterError

try:
    import simplejpeg
except ImportError:  # optional: Pillow decodes everything without it
    simplejpeg = None

#: The values of ``decoder``: simplejpeg where installed, or Pillow.
DECODERS = ('auto', 'pillow')

#: The JPEG colour spaces that simplejpeg decodes as Pillow does.
_SIMPLEJPEG_COLORSPACES = ('YCbCr', 'Gray')


#: The default cap on an image's bytes: ImageNet's largest JPEG is about
#: 15 MB; a multi-GB file named .JPEG (or a link to /dev/zero) is a bad
#: image, not an allocation.
MAX_IMAGE_BYTES = 64 << 20

#: ``(first bytes, Pillow format)`` of the formats a data set's images may
#: be in (:data:`image_data.image_list.IMAGE_EXTENSIONS`): the decoder is
#: chosen by them, never by trying every plug-in Pillow has.
FORMATS = ((b'\xff\xd8\xff', 'JPEG'), (b'\x89PNG\r\n\x1a\n', 'PNG'),
           (b'BM', 'BMP'), (b'GIF87a', 'GIF'), (b'GIF89a', 'GIF'),
           (b'II*\x00', 'TIFF'), (b'MM\x00*', 'TIFF'), (b'RIFF', 'WEBP'),
           (b'P1', 'PPM'), (b'P2', 'PPM'), (b'P3', 'PPM'), (b'P4', 'PPM'),
           (b'P5', 'PPM'), (b'P6', 'PPM'))


class UndecodableImageError(InputError):
    """An image that cannot be read or decoded; the message names it."""


def choose_decoder(name):
    """``'simplejpeg'`` for ``'auto'`` where simplejpeg is installed, else
    ``'pillow'``."""
    if name not in DECODERS:
        raise ParameterError('decoder', name, ' or '.join(DECODERS))
    return 'simplejpeg' if name == 'auto' and simplejpeg else 'pillow'


def load_rgb(path, side, decoder='pillow', limit=MAX_IMAGE_BYTES):
    """Decode ``path`` to an ``(H, W, 3)`` uint8 RGB array.

    ``path`` is an image file's path or an archive member
    (:class:`~image_data.archive_members.ArchiveMember`): its bytes are read
    in one piece (:func:`read_image`) and decoded from memory, so an image
    gives the same pixels from its file or from an archive.

    ``side`` is the shorter side the image will be resized to: JPEGs are
    decoded at the DCT scale Pillow's draft picks for it. ``decoder`` is a
    :func:`choose_decoder` result. Grayscale, palette, CMYK and alpha images
    are converted, not rejected; a truncated or corrupt file raises
    :class:`UndecodableImageError`, as does an image of more than
    ``limit`` bytes or in none of the :data:`FORMATS`.
    """
    with _naming_the_file(path):
        data = read_image(path, limit)
        if decoder == 'simplejpeg':
            pixels = _decode_jpeg(data, side)
            if pixels is not None:
                return pixels
        with Image.open(io.BytesIO(data), formats=[_format(data)]) as image:
            return numpy.asarray(_draft_rgb(image, side))


def read_image(path, limit=MAX_IMAGE_BYTES):
    """The bytes of an image file, or of an archive member (which reads
    itself), at most ``limit`` of them.

    A file is opened without blocking and read only if it is a regular
    file: a FIFO or a device among the images would block the open or the
    read, or never end.
    """
    if hasattr(path, 'read'):
        if path.length > limit:
            raise _too_large(path, path.length, limit)
        return path.read()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, 'rb') as f:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise UndecodableImageError('image {}: not a regular file'.format(
                path))
        if status.st_size > limit:
            raise _too_large(path, status.st_size, limit)
        return f.read(status.st_size)


def _too_large(path, size, limit):
    return UndecodableImageError(
        'image {}: {} bytes, above the cap of {} MiB on an image'.format(
            path, size, limit >> 20))


def _format(data):
    """The Pillow format that ``data``'s first bytes announce."""
    for magic, name in FORMATS:
        if data.startswith(magic):
            return name
    raise ValueError('no image format starts with {!r}'.format(data[:8]))


def load_square(path, side, decoder='pillow', limit=MAX_IMAGE_BYTES):
    """Decode ``path`` to a ``(side, side, 3)`` uint8 RGB array.

    The shorter side is resized to ``side`` (Pillow's bilinear filter) and
    the longer one centre-cropped, as ImageNet images are prepared for a 224
    crop out of 256. Decoding is :func:`load_rgb`'s.
    """
    return square(load_rgb(path, side, decoder, limit), side)


def resized_size(width, height, side):
    """``(width, height)`` of an image whose shorter side is resized to
    ``side``, the longer one in proportion (rounded), at least ``side``."""
    scale = side / min(width, height)
    return max(side, round(width * scale)), max(side, round(height * scale))


@contextlib.contextmanager
def _naming_the_file(path):
    """Every error of reading or decoding ``path`` as
    :class:`UndecodableImageError` naming it: Pillow's decoders raise many
    kinds for a file that is not what its first bytes say. Out of memory is
    the machine's, not the image's; an :class:`InputError` (an archive that
    changed) is the data set's."""
    try:
        yield
    except (InputError, MemoryError):
        raise
    except Exception as e:
        raise UndecodableImageError('image {}: cannot be decoded ({})'
                                    .format(path, e or type(e).__name__))


def square(pixels, side):
    """The centre ``side`` square of ``(H, W, 3)`` uint8 ``pixels`` whose
    shorter side is resized to ``side``, as :func:`load_square` makes it."""
    return _square(Image.fromarray(pixels), side)


#: Pillow's modes of 16-bit and 32-bit integer pixels, read as 0..65535.
WIDE_INTEGER_MODES = ('I;16', 'I;16B', 'I;16L', 'I;16N', 'I')
_ORIENTATION = 0x0112


def _draft_rgb(image, side):
    image.draft('RGB', (side, side))
    if image.getexif().get(_ORIENTATION, 1) != 1:
        image = ImageOps.exif_transpose(image)
    if image.mode in WIDE_INTEGER_MODES or image.mode == 'F':
        return _eight_bits(numpy.asarray(image), image.mode == 'F')
    return image.convert('RGB')


def _eight_bits(values, floating):
    """One channel of wide pixels as ``(H, W, 3)`` uint8 (the module
    docstring's scaling)."""
    values = values.astype(numpy.float64)
    if floating:
        if numpy.nanmin(values) >= 0 and numpy.nanmax(values) <= 1:
            values = values * 255
    else:
        values = values * (255 / 65535)
    pixels = numpy.rint(numpy.clip(numpy.nan_to_num(values), 0, 255))
    return numpy.repeat(pixels.astype(numpy.uint8)[..., None], 3, axis=2)


def _square(image, side):
    w, h = image.size
    new_w, new_h = resized_size(w, h, side)
    left, top = (new_w - side) // 2, (new_h - side) // 2
    if (w, h) != (side, side):
        image = image.resize((new_w, new_h), Image.BILINEAR,
                             box=None).crop(
            (left, top, left + side, top + side))
    return numpy.asarray(image)


def _draft_scale(width, height, side):
    """The denominator Pillow's JPEG draft picks: the largest of 8, 4, 2, 1
    that ``min(width // side, height // side)`` reaches (1 if none)."""
    reach = min(width // side, height // side)
    return next((s for s in (8, 4, 2) if reach >= s), 1)


def _decode_jpeg(data, side):
    """simplejpeg's pixels of a JPEG's bytes, or None for Pillow to
    decode."""
    if not simplejpeg.is_jpeg(data) or b'Exif' in data[:65536]:
        return None  # Pillow decodes it, and applies EXIF orientation
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
        limit = Image.MAX_IMAGE_PIXELS
        if colorspace not in _SIMPLEJPEG_COLORSPACES or \
                limit and width * height > limit:
            return None  # Pillow converts it, or warns of a huge one
        s = _draft_scale(width, height, side)
        shape = (-(-height // s), -(-width // s), 3)
        pixels = simplejpeg.decode_jpeg(data, 'RGB', min_height=shape[0],
                                        min_width=shape[1])
    except ValueError:  # corrupt or truncated: Pillow names the error
        return None
    return pixels if pixels.shape == shape else None

"""Training and validation transforms: crop, flip and mean subtraction.

Both map a ``(path, label)`` example to a ``(3, crop, crop)`` float32 image
``(pixel - mean) / 255`` and an int32 label. The training transform takes a
``numpy.random.Generator`` so that augmentation is reproducible per sample,
whichever loader process runs it.

The crop is that of the image resized to ``resize`` (shorter side) and
centre-cropped to a square. By default only the crop's box of the decoded
image is resized, unless the image is enlarged (:mod:`image_data.crop_window`);
``resize_whole_image`` resizes the whole image, then crops, as
:func:`image_data.decoding.load_square` does (a few pixels differ by one level
between the two).
"""

import chainer
import numpy

from image_data.crop_window import crop_of_resized
from image_data.decoding import choose_decoder
from image_data.decoding import load_rgb
from image_data.decoding import load_square
from image_data.decoding import MAX_IMAGE_BYTES
from image_data.decoding import UndecodableImageError
from largebatch import input_files
from largebatch import npz_members
from largebatch.errors import InputError
from largebatch.errors import ParameterError

#: Per-channel RGB mean of ImageNet's training set, in 0..255.
IMAGENET_MEAN = numpy.array([123.675, 116.28, 103.53], dtype=numpy.float32)

#: The first bytes of every ``.npy`` file (NumPy's format, any version).
NPY_MAGIC = b'\x93NUMPY'


def resize_for(crop_size):
    """The square side images are resized to before cropping (256 for 224)."""
    return int(round(crop_size * 256 / 224))


def load_mean(path, resize):
    """Read a per-channel ``(3,)`` or per-pixel ``(3, resize, resize)`` mean.

    ``path`` is a ``.npy`` file (as Chainer's compute_mean.py writes) or None
    for ImageNet's per-channel mean: values of 0..255, finite in float32, as
    the transforms use them. Raises :class:`InputError` whose message starts
    with the path.
    """
    if path is None:
        return IMAGENET_MEAN
    input_files.check_regular(path)
    with open(path, 'rb') as f:
        magic = f.read(len(NPY_MAGIC))
    if magic != NPY_MAGIC:
        raise InputError('{}: not a .npy array ({})'.format(path, (
            'empty' if not magic else 'an .npz archive'
            if magic.startswith(b'PK') else 'no .npy header')))
    with npz_members.NpyFile(path) as npy:  # its header, before its values
        shape, dtype = npy.header.shape, npy.header.dtype
        if dtype.kind not in 'biuf':
            raise InputError('{}: expected numbers, got a {} array'.format(
                path, dtype))
        if 0 in shape:
            raise InputError('{}: an empty array of shape {}; expected (3,) '
                             'or (3, {}, {})'.format(path, shape, resize,
                                                     resize))
        if shape not in ((3,), (3, resize, resize)):
            raise InputError(
                '{}: shape {} is neither (3,) nor (3, {}, {}) (the resized '
                'image side)'.format(path, shape, resize, resize))
        mean = npy.read()
    if not numpy.isfinite(mean.astype(numpy.float32)).all():
        raise InputError('{}: holds values that are not finite in float32, '
                         'as the transforms use them'.format(path))
    if mean.min() < 0 or mean.max() > 255:
        raise InputError('{}: holds values outside 0..255 (from {:g} to '
                         '{:g}); expected a mean of 8-bit pixels'.format(
                             path, mean.min(), mean.max()))
    return mean.astype(numpy.float32)


def scale_and_center(crops, scale, scaled_mean):
    """``crops * scale - scaled_mean`` in float32 on the crops' device: one
    scaling cast of the uint8 crops into a fresh float32 buffer and one
    in-place subtraction, the same roundings on NumPy and CuPy."""
    xp = chainer.backend.get_array_module(crops)
    out = xp.empty(crops.shape, numpy.float32)
    xp.multiply(crops, scale, out=out, dtype=numpy.float32)
    out -= scaled_mean
    return out


class _CropTransform(object):
    """Args: ``decoder`` is ``'auto'`` (simplejpeg where installed) or
    ``'pillow'`` (:func:`image_data.decoding.choose_decoder`);
    ``resize_whole_image`` resizes the whole image before cropping;
    ``uint8_output`` returns the uint8 crop, which the converter normalizes
    on the device with :meth:`normalize_batch` (a quarter of the bytes
    to send; per-channel means only); an image of more than
    ``max_image_bytes`` is a bad image, not read."""

    def __init__(self, crop_size, mean, resize=None, skip_bad_images=False,
                 decoder='auto', resize_whole_image=False,
                 uint8_output=False, max_image_bytes=MAX_IMAGE_BYTES):
        self.crop_size = crop_size
        self.skip_bad_images = skip_bad_images
        self.resize = resize or resize_for(crop_size)
        if crop_size > self.resize:
            raise ParameterError(
                'crop_size', crop_size,
                'at most the resized image side {}'.format(self.resize))
        self.decoder = choose_decoder(decoder)
        self.resize_whole_image = resize_whole_image
        self.mean = mean if mean.ndim == 3 else mean.reshape(3, 1, 1)
        self.scale = numpy.float32(1.0 / 255.0)
        self.scaled_mean = self.mean * self.scale
        if uint8_output and self.mean.shape[1] != 1:
            raise ParameterError('uint8_output', uint8_output,
                                 'False with a per-pixel mean')
        self.uint8_output = uint8_output
        self.max_image_bytes = max_image_bytes

    def normalize_batch(self, crops):
        """A batch of :attr:`uint8_output` crops as the transform's float32
        images, on the crops' device."""
        xp = chainer.backend.get_array_module(crops)
        return scale_and_center(crops, self.scale,
                                xp.asarray(self.scaled_mean))

    def _load(self, path):
        """The resized square image, or None for an undecodable one when
        skipping; an image decoded already (:mod:`image_data.in_memory`) as
        it is."""
        if isinstance(path, numpy.ndarray):
            return path
        return self._decode(load_square, path)

    def _crop(self, path, top, left):
        """The ``crop_size`` uint8 crop at ``(top, left)`` of the resized
        square image, or None for an undecodable one when skipping."""
        c = self.crop_size
        if self.resize_whole_image or isinstance(path, numpy.ndarray):
            image = self._load(path)
            return None if image is None else image[top:top + c, left:left + c]
        pixels = self._decode(load_rgb, path)
        if pixels is None:
            return None
        return crop_of_resized(pixels, self.resize, top, left, c)

    def _decode(self, load, path):
        try:
            return load(path, self.resize, self.decoder,
                        self.max_image_bytes)
        except UndecodableImageError:
            if self.skip_bad_images:
                return None
            raise

    def _normalize(self, crop, top, left, flip=False):
        """``(crop - mean) / 255`` in CHW, as ``crop / 255 - mean / 255``
        (:func:`scale_and_center`), or the uint8 CHW crop with
        ``uint8_output``.

        The scaling cast and the in-place subtraction of the pre-scaled mean
        are about 3x cheaper than a mixed-type subtraction, which NumPy
        casts through buffers. ``(top, left)`` places the crop in the
        resized image, for a per-pixel mean; a flip mirrors the crop with
        its window of the mean.
        """
        c = self.crop_size
        crop = crop.transpose(2, 0, 1)
        mean = self.scaled_mean
        if mean.shape[1] != 1:
            mean = mean[:, top:top + c, left:left + c]
        if flip:
            crop, mean = crop[:, :, ::-1], mean[:, :, ::-1]
        if self.uint8_output:
            return numpy.ascontiguousarray(crop)
        return scale_and_center(crop, self.scale, mean)


class TrainTransform(_CropTransform):
    """Random ``crop_size`` crop and horizontal flip of the resized image.

    Returns None for an undecodable image when skipping bad images.
    """

    def __call__(self, example, rng):
        path, label = example
        top, left = rng.integers(0, self.resize - self.crop_size + 1, size=2)
        flip = rng.random() < 0.5
        crop = self._crop(path, top, left)
        if crop is None:
            return None
        return self._normalize(crop, top, left, flip), numpy.int32(label)


class ValTransform(_CropTransform):
    """Centre ``crop_size`` crop of the resized image (None for an
    undecodable one when skipping bad images)."""

    def __call__(self, example):
        path, label = example
        offset = (self.resize - self.crop_size) // 2
        crop = self._crop(path, offset, offset)
        if crop is None:
            return None
        return self._normalize(crop, offset, offset), numpy.int32(label)

import os

import numpy
import pytest
from PIL import Image

from benchmarks.photos import write_photos
import image_data
from largebatch import errors


def write_image(path, size, mode, color):
    Image.new(mode, size, color).save(path)


def test_train_transform_shape_range_and_determinism(tmp_path):
    path = str(tmp_path / 'x.jpg')
    Image.fromarray(numpy.random.RandomState(0).randint(
        0, 256, (48, 64, 3)).astype(numpy.uint8)).save(path)
    mean = image_data.load_mean(None, 36)
    t = image_data.TrainTransform(32, mean, 36)
    x, label = t((path, 4), numpy.random.default_rng(1))
    y, _ = t((path, 4), numpy.random.default_rng(1))
    assert x.shape == (3, 32, 32) and x.dtype == numpy.float32
    assert label == 4 and label.dtype == numpy.int32
    assert (x == y).all()
    assert -0.5 < x.min() and x.max() < 0.6  # (pixel - mean) / 255
    outs = {t((path, 0), numpy.random.default_rng(s))[0].tobytes()
            for s in range(20)}
    assert len(outs) > 5  # crops and flips vary with the generator


def test_val_transform_is_a_centre_crop(tmp_path):
    path = str(tmp_path / 'x.png')
    image = numpy.arange(36 * 36 * 3, dtype=numpy.uint32).reshape(36, 36, 3)
    Image.fromarray((image % 251).astype(numpy.uint8)).save(path)
    mean = numpy.zeros(3, numpy.float32)
    x, _ = image_data.ValTransform(32, mean, 36)((path, 0))
    expected = (image % 251)[2:34, 2:34].transpose(2, 0, 1) / 255.
    numpy.testing.assert_allclose(x, expected, rtol=1e-6)


def test_per_pixel_mean_is_cropped_with_the_image(tmp_path):
    path = str(tmp_path / 'x.png')
    write_image(path, (36, 36), 'RGB', (10, 20, 30))
    mean_file = str(tmp_path / 'mean.npy')
    pixel_mean = numpy.zeros((3, 36, 36), numpy.float32)
    pixel_mean[:, 2:34, 2:34] = numpy.array([10, 20, 30])[:, None, None]
    numpy.save(mean_file, pixel_mean)
    mean = image_data.load_mean(mean_file, 36)
    x, _ = image_data.ValTransform(32, mean, 36)((path, 0))
    assert (x == 0).all()


def test_mean_file_of_wrong_shape_is_refused(tmp_path):
    mean_file = str(tmp_path / 'mean.npy')
    numpy.save(mean_file, numpy.zeros((3, 10, 10)))
    with pytest.raises(errors.InputError, match=r'mean\.npy: shape'):
        image_data.load_mean(mean_file, 36)


@pytest.mark.parametrize('write, expected', [
    (lambda path: open(path, 'w').close(), 'not a .npy array (empty)'),
    (lambda path: open(path, 'w').write('127 127 127\n'),
     'not a .npy array (no .npy header)'),
    (lambda path: numpy.savez(path, mean=numpy.zeros(3)),
     'not a .npy array (an .npz archive)'),
    (lambda path: numpy.save(path, numpy.array(['1', '2', '3'])),
     'expected numbers, got a <U1 array'),
    (lambda path: numpy.save(path, numpy.array([1, numpy.nan, 3])),
     'holds values that are not finite in float32, as the transforms use '
     'them'),
    (lambda path: numpy.save(path, numpy.array([1, 1e39, 3])),
     'holds values that are not finite in float32, as the transforms use '
     'them'),
    (lambda path: numpy.save(path, numpy.zeros((0, 3))),
     'an empty array of shape (0, 3); expected (3,) or (3, 36, 36)'),
    (lambda path: numpy.save(path, numpy.array([1, 1e30, 3])),
     'holds values outside 0..255 (from 1 to 1e+30); expected a mean of '
     '8-bit pixels'),
])
def test_a_mean_file_that_is_no_mean_is_refused(tmp_path, write, expected):
    mean_file = str(tmp_path / 'mean.npy')
    write(mean_file)
    if os.path.exists(mean_file + '.npz'):  # savez adds the suffix
        os.rename(mean_file + '.npz', mean_file)
    with pytest.raises(errors.InputError) as e:
        image_data.load_mean(mean_file, 36)
    assert str(e.value) == '{}: {}'.format(mean_file, expected)


def test_library_errors_name_parameters_and_files_not_flags(tmp_path):
    with pytest.raises(errors.ParameterError) as e:
        image_data.ValTransform(40, image_data.load_mean(None, 36), 36)
    assert str(e.value) == ('crop_size must be at most the resized image '
                            'side 36, got 40')
    missing = str(tmp_path / 'mean.npy')
    with pytest.raises(errors.InputError) as e:
        image_data.load_mean(missing, 36)
    assert str(e.value) == '{}: no such file'.format(missing)


@pytest.fixture(scope='module')
def photos(tmp_path_factory):
    return write_photos(str(tmp_path_factory.mktemp('photos')))


def older_train_transform(path, crop, side, rng):
    """The training transform as it was written before the crop box:
    Pillow decodes, resizes the whole image, crops, normalizes."""
    with Image.open(path) as image:
        image.draft('RGB', (side, side))
        image = image.convert('RGB')
        w, h = image.size
        scale = side / min(w, h)
        new_w, new_h = max(side, round(w * scale)), max(side, round(h * scale))
        left, top = (new_w - side) // 2, (new_h - side) // 2
        square = numpy.asarray(image.resize((new_w, new_h), Image.BILINEAR)
                               .crop((left, top, left + side, top + side)))
    top, left = rng.integers(0, side - crop + 1, size=2)
    flip = rng.random() < 0.5
    x = square[top:top + crop, left:left + crop].transpose(2, 0, 1)
    if flip:
        x = x[:, :, ::-1]
    scale = numpy.float32(1 / 255)
    out = numpy.empty(x.shape, numpy.float32)
    numpy.multiply(x, scale, out=out, dtype=numpy.float32)
    out -= image_data.transforms.IMAGENET_MEAN.reshape(3, 1, 1) * scale
    return out


def test_pillow_and_the_whole_image_give_the_older_pixels_bit_for_bit(
        photos):
    mean = image_data.load_mean(None, 256)
    t = image_data.TrainTransform(224, mean, 256, decoder='pillow',
                                  resize_whole_image=True)
    for path in photos:
        for seed in range(4):
            x, _ = t((path, 0), numpy.random.default_rng(seed))
            numpy.testing.assert_array_equal(x, older_train_transform(
                path, 224, 256, numpy.random.default_rng(seed)))


@pytest.mark.parametrize('decoder', ['auto', 'pillow'])
def test_the_crop_box_is_within_one_level_of_the_whole_image(photos,
                                                             decoder):
    """Same seed, same crop and flip: the generator is drawn alike, and
    the pixels differ by at most one level in under 1% of the values."""
    mean = image_data.load_mean(None, 256)
    fast = image_data.TrainTransform(224, mean, 256, decoder=decoder)
    whole = image_data.TrainTransform(224, mean, 256, decoder='pillow',
                                      resize_whole_image=True)
    levels = []
    for path in photos:
        for seed in range(4):
            rng_fast = numpy.random.default_rng(seed)
            rng_whole = numpy.random.default_rng(seed)
            x, _ = fast((path, 0), rng_fast)
            y, _ = whole((path, 0), rng_whole)
            assert rng_fast.random() == rng_whole.random()
            levels.append(numpy.rint(255 * numpy.abs(x - y)))
    levels = numpy.concatenate(levels)
    assert levels.max() <= 1 and levels.mean() < 0.01


def test_the_validation_crop_box_is_within_one_level_too(photos):
    mean = image_data.load_mean(None, 256)
    x, _ = image_data.ValTransform(224, mean, 256)((photos[0], 0))
    y, _ = image_data.ValTransform(224, mean, 256, decoder='pillow',
                                   resize_whole_image=True)((photos[0], 0))
    assert numpy.abs(x - y).max() <= 1.001 / 255


def test_an_unknown_decoder_is_refused():
    with pytest.raises(errors.ParameterError, match='decoder must be'):
        image_data.TrainTransform(32, image_data.load_mean(None, 36), 36,
                                  decoder='turbo')

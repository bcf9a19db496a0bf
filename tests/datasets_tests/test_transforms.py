import numpy
import pytest
from PIL import Image

import datasets
import errors


def write_image(path, size, mode, color):
    Image.new(mode, size, color).save(path)


def test_train_transform_shape_range_and_determinism(tmp_path):
    path = str(tmp_path / 'x.jpg')
    Image.fromarray(numpy.random.RandomState(0).randint(
        0, 256, (48, 64, 3)).astype(numpy.uint8)).save(path)
    mean = datasets.load_mean(None, 36)
    t = datasets.TrainTransform(32, mean, 36)
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
    x, _ = datasets.ValTransform(32, mean, 36)((path, 0))
    expected = (image % 251)[2:34, 2:34].transpose(2, 0, 1) / 255.
    numpy.testing.assert_allclose(x, expected, rtol=1e-6)


def test_per_pixel_mean_is_cropped_with_the_image(tmp_path):
    path = str(tmp_path / 'x.png')
    write_image(path, (36, 36), 'RGB', (10, 20, 30))
    mean_file = str(tmp_path / 'mean.npy')
    pixel_mean = numpy.zeros((3, 36, 36), numpy.float32)
    pixel_mean[:, 2:34, 2:34] = numpy.array([10, 20, 30])[:, None, None]
    numpy.save(mean_file, pixel_mean)
    mean = datasets.load_mean(mean_file, 36)
    x, _ = datasets.ValTransform(32, mean, 36)((path, 0))
    assert (x == 0).all()


def test_mean_file_of_wrong_shape_is_refused(tmp_path):
    mean_file = str(tmp_path / 'mean.npy')
    numpy.save(mean_file, numpy.zeros((3, 10, 10)))
    with pytest.raises(errors.InputError, match=r'mean\.npy: shape'):
        datasets.load_mean(mean_file, 36)


def test_library_errors_name_parameters_and_files_not_flags(tmp_path):
    with pytest.raises(errors.ParameterError) as e:
        datasets.ValTransform(40, datasets.load_mean(None, 36), 36)
    assert str(e.value) == ('crop_size must be at most the resized image '
                            'side 36, got 40')
    missing = str(tmp_path / 'mean.npy')
    with pytest.raises(errors.InputError) as e:
        datasets.load_mean(missing, 36)
    assert str(e.value) == '{}: no such file'.format(missing)

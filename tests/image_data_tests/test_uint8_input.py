"""Images as uint8 to the device, normalized there: the same float32 batch
as the transform's own normalization, bit for bit."""
import numpy
import pytest

import image_data
from largebatch.errors import ParameterError


def images(n, side=20):
    rng = numpy.random.RandomState(0)
    return [(rng.randint(0, 256, (side, side, 3)).astype(numpy.uint8),
             numpy.int32(i)) for i in range(n)]


@pytest.mark.parametrize('kind', ['train', 'val'])
def test_uint8_batches_normalize_to_the_float32_ones(kind):
    mean = numpy.array([120.5, 110.25, 100.0], numpy.float32)
    made = {}
    for uint8 in (False, True):
        if kind == 'train':
            transform = image_data.TrainTransform(16, mean, 20,
                                                  uint8_output=uint8)
            rng = numpy.random.default_rng(3)
            batch = [transform(example, rng) for example in images(6)]
        else:
            transform = image_data.ValTransform(16, mean, 20,
                                                uint8_output=uint8)
            batch = [transform(example) for example in images(6)]
        converter = image_data.SkippingConverter(
            transform.normalize_batch if uint8 else None)
        x, t = converter(batch)
        if uint8:
            assert batch[0][0].dtype == numpy.uint8
        made[uint8] = x
    assert made[True].dtype == numpy.float32
    numpy.testing.assert_array_equal(made[True], made[False])


def test_a_per_pixel_mean_stays_on_the_host():
    with pytest.raises(ParameterError):
        image_data.TrainTransform(16, numpy.zeros((3, 20, 20), numpy.float32),
                                  20, uint8_output=True)

import numpy
import PIL
from PIL import Image
import pytest

from benchmarks.photos import write_photos
from image_data import crop_window
from image_data import decoding

needs_c_loops = pytest.mark.skipif(crop_window._resample is None,
                                   reason='image_data._resample is not built')
#: Pillow 13 runs the vertical pass first when the height shrinks by more
#: than twice as many pixels as the width; older versions never do.
PILLOW_ORDERS_PASSES = int(PIL.__version__.split('.')[0]) >= 13


@pytest.fixture(scope='module')
def photos(tmp_path_factory):
    return [decoding.load_rgb(path, 256) for path in
            write_photos(str(tmp_path_factory.mktemp('photos')))]


def pillow_resize(pixels, box, size):
    return numpy.asarray(Image.fromarray(pixels).resize(
        size, Image.BILINEAR, box=box))


def test_the_box_of_an_image_already_at_the_side_is_the_crop():
    assert crop_window.source_box(36, 36, 36, 3, 1, 32) == (1, 3, 33, 35)


def test_the_box_is_the_resized_window_in_source_pixels():
    # 500x375 is resized to 341x256; its centre square starts at column 42
    x0, y0, x1, y1 = crop_window.source_box(500, 375, 256, 10, 20, 224)
    assert (x0, x1) == pytest.approx((62 * 500 / 341, 286 * 500 / 341))
    assert (y0, y1) == pytest.approx((10 * 375 / 256, 234 * 375 / 256))
    # a window at the far corner ends exactly at the image's edge
    assert crop_window.source_box(512, 512, 256, 32, 32, 224)[2:] == (512, 512)


@needs_c_loops
def test_the_c_loops_give_pillows_bits_on_crop_boxes(photos):
    rng = numpy.random.default_rng(0)
    for pixels in photos:
        height, width = pixels.shape[:2]
        for top, left in rng.integers(0, 33, size=(8, 2)):
            box = crop_window.source_box(width, height, 256, top, left, 224)
            numpy.testing.assert_array_equal(
                crop_window.resize_box(pixels, box, 224),
                pillow_resize(pixels, box, (224, 224)))


@needs_c_loops
def test_the_c_loops_give_pillows_bits_on_any_box(photos):
    """Down- and upscaling, tiny and odd-shaped images, both pass orders."""
    rng = numpy.random.default_rng(1)
    checked = 0
    for trial in range(300):
        if trial % 3:
            pixels = photos[trial % len(photos)]
        else:
            shape = tuple(rng.integers(1, 40, 2)) + (3,)
            pixels = rng.integers(0, 256, shape, numpy.uint8)
        height, width = pixels.shape[:2]
        x0, y0 = rng.uniform(0, width - 0.01), rng.uniform(0, height - 0.01)
        box = (x0, y0, rng.uniform(x0 + 0.005, width),
               rng.uniform(y0 + 0.005, height))
        out_w, out_h = (int(n) for n in rng.integers(1, 250, 2))
        vertical_first = 0 < height - out_h and \
            height - out_h > 2 * (width - out_w)
        if vertical_first and not PILLOW_ORDERS_PASSES:
            continue
        out = numpy.empty((out_h, out_w, 3), numpy.uint8)
        crop_window._resample.resize_box(pixels, out, *box)
        numpy.testing.assert_array_equal(
            out, pillow_resize(pixels, box, (out_w, out_h)))
        checked += 1
    assert checked > 200


def test_without_the_c_loops_pillow_resizes_to_the_same_pixels(
        photos, monkeypatch):
    pixels = photos[0]
    box = crop_window.source_box(500, 375, 256, 7, 30, 224)
    built = crop_window.resize_box(pixels, box, 224)
    monkeypatch.setattr(crop_window, '_resample', None)
    numpy.testing.assert_array_equal(
        crop_window.resize_box(pixels, box, 224), built)


@pytest.mark.parametrize('box', [(0, 0, 501, 375), (-1, 0, 10, 10),
                                 (5, 5, 5, 20)])
def test_a_box_outside_the_image_or_empty_is_refused(photos, box):
    with pytest.raises(ValueError):
        crop_window.resize_box(photos[0], box, 8)


def test_an_enlarged_image_is_resized_whole_then_cropped():
    # 28 x 28 to 37: the centre of output row 18 is 18.5 x 28 / 37 = 14.0,
    # a pixel boundary, where the float32 box would move the filter.
    pixels = numpy.random.RandomState(0).randint(
        0, 256, (28, 28, 3)).astype(numpy.uint8)
    for top, left in ((2, 2), (0, 5), (5, 0)):
        whole = decoding.square(pixels, 37)[top:top + 32, left:left + 32]
        numpy.testing.assert_array_equal(
            crop_window.crop_of_resized(pixels, 37, top, left, 32), whole)
    big = numpy.random.RandomState(1).randint(
        0, 256, (375, 500, 3)).astype(numpy.uint8)
    box = crop_window.source_box(500, 375, 256, 7, 30, 224)
    numpy.testing.assert_array_equal(
        crop_window.crop_of_resized(big, 256, 7, 30, 224),
        crop_window.resize_box(big, box, 224))

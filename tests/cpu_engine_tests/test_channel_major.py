"""cpu_engine.channel_major: the layout and the im2col columns."""
import numpy

from cpu_engine.channel_major import channel_major
from cpu_engine.channel_major import im2col
from cpu_engine.channel_major import nchw
from cpu_engine_helper import layout


def test_im2col_matches_a_padded_reference():
    rng = numpy.random.RandomState(5)
    xc = rng.standard_normal((2, 3, 5, 6)).astype(numpy.float32)
    # asymmetric: 1 row of padding on top, 3 below; -1 column (cropped).
    col = im2col(xc, 3, 2, 2, 1, 1, -1, 4, 4).reshape(2, 3, 2, 3, 4, 4)
    padded = numpy.zeros((2, 3, 5 + 1 + 3, 6 + 5), numpy.float32)
    padded[:, :, 1:6, :5] = xc[:, :, :, 1:]
    for i in range(3):
        for j in range(2):
            numpy.testing.assert_array_equal(
                col[:, i, j], padded[:, :, i:i + 7:2, j:j + 4])


def test_channel_major_is_a_view_when_it_can_be():
    x = layout(numpy.ones((2, 3, 4, 5), numpy.float32), 'channel-major')
    assert numpy.shares_memory(channel_major(x), x)
    y = numpy.arange(120, dtype=numpy.float32).reshape(2, 3, 4, 5)
    assert channel_major(y).flags.c_contiguous
    assert not numpy.shares_memory(channel_major(y), y)
    numpy.testing.assert_array_equal(nchw(channel_major(y)), y)

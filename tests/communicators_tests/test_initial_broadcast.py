"""Broadcasting the parameters by dtype: each dtype's arrays in one flat
array of that dtype, and back into the parameters unrounded."""
import chainer
import numpy

from communicators.initial_broadcast import broadcast_by_dtype


def mixed16_params(seed):
    rng = numpy.random.RandomState(seed)
    return [chainer.Parameter(rng.randn(*shape).astype(dtype))
            for shape, dtype in (((3, 4), numpy.float16),
                                 ((5,), numpy.float32),
                                 ((2, 2, 2), numpy.float16),
                                 ((7,), numpy.float32))]


def test_each_dtype_travels_in_its_own_dtype_and_lands_in_place():
    root, mine = mixed16_params(0), mixed16_params(1)
    sent = []

    def bcast(flat):  # rank 0's flat array of this dtype arrives
        sent.append(flat.dtype)
        source = numpy.concatenate([p.array.ravel() for p in root
                                    if p.dtype == flat.dtype])
        flat[...] = source

    broadcast_by_dtype(mine + [chainer.Parameter()], bcast)
    assert sorted(sent, key=str) == [numpy.float16, numpy.float32]
    for got, want in zip(mine, root):
        assert got.dtype == want.dtype
        numpy.testing.assert_array_equal(got.array, want.array)

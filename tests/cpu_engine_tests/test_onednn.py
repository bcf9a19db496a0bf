"""cpu_engine.onednn: the library loads, and its GEMM is NumPy's."""
import platform
import sys

import numpy
import pytest

from cpu_engine import onednn
from cpu_engine_helper import TOL32

needs_onednn = pytest.mark.skipif(not onednn.available(),
                                  reason='oneDNN is not installed')


@needs_onednn
@pytest.mark.parametrize('m, k, n', [(5, 7, 3), (64, 300, 129), (1, 1, 1),
                                     (3, 0, 4), (0, 2, 3)])
def test_matmul_matches_numpy(m, k, n):
    rng = numpy.random.RandomState(4)
    a = rng.standard_normal((m, k)).astype(numpy.float32)
    b = rng.standard_normal((k, n)).astype(numpy.float32)
    # Plain, transposed, and strided in both axes (copied) operands.
    wide = numpy.zeros((2 * k, 2 * n), numpy.float32)
    wide[::2, ::2] = b
    for a_ in (a, numpy.asfortranarray(a)):
        for b_ in (b, numpy.asfortranarray(b), wide[::2, ::2]):
            numpy.testing.assert_allclose(onednn.matmul(a_, b_), a.dot(b),
                                          **TOL32)
    out = numpy.full((m, n + 5), 7, numpy.float32)
    onednn.matmul(a, b, out[:, 2:2 + n])
    numpy.testing.assert_allclose(out[:, 2:2 + n], a.dot(b), **TOL32)
    assert (out[:, :2] == 7).all() and (out[:, 2 + n:] == 7).all()


def test_is_loaded_where_its_wheel_installs():
    if not (sys.platform.startswith('linux')
            and platform.machine() == 'x86_64'):
        pytest.skip('onednn-cpu-gomp has wheels for x86-64 Linux only')
    assert onednn.available()

"""cpu_engine.onednn: the library loads, its GEMM is NumPy's, and the
forward's reordered input is kept for the weight gradient."""
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


@needs_onednn
def test_the_forward_copy_of_x_serves_the_weight_gradient(monkeypatch):
    rng = numpy.random.RandomState(5)
    # Channel-major x: the primitive reorders it into its blocked layout.
    x = rng.standard_normal((16, 2, 8, 8)).astype(
        numpy.float32).transpose(1, 0, 2, 3)
    W = rng.standard_normal((16, 16, 3, 3)).astype(numpy.float32)
    gy = rng.standard_normal((2, 16, 8, 8)).astype(numpy.float32)
    kept = []
    onednn.convolution([('forward', x, W, numpy.empty_like(gy))], (1, 1),
                       (1, 1), kept)
    assert [copy[0] is x for copy in kept] == [True]

    reorders = []
    execute = onednn._execute

    def counting(primitive, args, what):
        reorders.append(what == 'reorder')
        return execute(primitive, args, what)
    monkeypatch.setattr(onednn, '_execute', counting)
    gWs, counts = [], []
    for copies in (kept, None):
        del reorders[:]
        gWs.append(numpy.empty_like(W))
        onednn.convolution([('backward_weights', x, gWs[-1], gy)], (1, 1),
                           (1, 1), copies)
        counts.append(sum(reorders))
    # Without the kept copy, x is reordered again; the gradient is the same.
    assert counts[1] == counts[0] + 1
    assert gWs[0].tobytes() == gWs[1].tobytes()

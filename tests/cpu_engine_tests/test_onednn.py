"""cpu_engine.onednn: the library loads, its GEMM is NumPy's, the
forward's reordered input is kept for the weight gradient, and it takes
channels-last activations only with AVX-512 kernels."""
import os
import platform
import subprocess
import sys

import numpy
import pytest

from conftest import REPO
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


@needs_onednn
def test_activations_stay_channel_major_where_onednn_lacks_avx512():
    """``ONEDNN_MAX_CPU_ISA=AVX2`` gives oneDNN an AVX2 machine's kernels,
    whose 1x1 convolutions of channels-last memory are reference code: the
    engine's default layout is then channel-major."""
    code = '\n'.join([
        'import largebatch.chainer_compat',
        'import numpy',
        'import cpu_engine',
        'from cpu_engine import channels_last, onednn',
        'x = numpy.ones((2, 8, 9, 9), numpy.float32)',
        'W = numpy.ones((8, 8, 3, 3), numpy.float32)',
        'y = cpu_engine.convolution_2d(x, W, pad=1).array',
        'print(onednn.convolves_channels_last(), channels_last.enabled(),',
        '      y.transpose(1, 0, 2, 3).flags.c_contiguous)'])
    for isa, expected in (('AVX2', 'False False True'),
                          ('ALL', None)):
        out = subprocess.run(
            [sys.executable, '-c', code], cwd=REPO, capture_output=True,
            text=True, timeout=60,
            env=dict(os.environ, PYTHONPATH=REPO, ONEDNN_MAX_CPU_ISA=isa))
        assert out.returncode == 0, out.stderr
        if expected is not None:
            assert out.stdout.strip() == expected
        else:  # this machine's own kernels: channels-last where AVX-512
            avx512, enabled, channel_major = out.stdout.split()
            assert enabled == avx512
            assert channel_major == str(avx512 == 'False')


def test_its_out_of_memory_is_a_memory_error():
    """So that the job ends it with its one line and advice, as NumPy's
    (tests/integration/test_reliability.py meets either)."""
    with pytest.raises(MemoryError) as info:
        onednn._check(1, 'reorder')
    assert str(info.value) == 'oneDNN reorder could not allocate its memory'
    with pytest.raises(RuntimeError):
        onednn._check(2, 'reorder')

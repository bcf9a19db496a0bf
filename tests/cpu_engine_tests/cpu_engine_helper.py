"""Shared by the tests of ``cpu_engine``: array layouts and comparisons."""
import os
import subprocess
import sys

import chainer
import numpy
import pytest

from conftest import REPO
from cpu_engine import cpu_runtime

TOL32 = dict(atol=1e-4, rtol=1e-4)


def layout(x, kind):
    """``x`` stored NCHW, channel-major, channels-last, or as a strided
    (sliced) view."""
    if kind == 'nchw':
        return numpy.ascontiguousarray(x)
    if kind == 'channel-major':
        return numpy.ascontiguousarray(x.transpose(1, 0, 2, 3)).transpose(
            1, 0, 2, 3)
    if kind == 'channels-last':
        return numpy.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(
            0, 3, 1, 2)
    wide = numpy.zeros(x.shape[:3] + (2 * x.shape[3],), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


def is_channel_major(a):
    return a.transpose(1, 0, 2, 3).flags.c_contiguous


def is_channels_last(a):
    return a.transpose(0, 2, 3, 1).flags.c_contiguous


def assert_keeps_layout(y, x, kernels):
    """An operation that keeps its input's layout: channels-last for a
    float32 channels-last ``x`` (as :func:`run` copies it) with the C
    loops, else channel-major."""
    if (kernels == 'native' and x.dtype == numpy.float32
            and is_channels_last(x.copy(order='K'))):
        assert is_channels_last(y)
    else:
        assert is_channel_major(y)


def run(f, arrays, gy_seed=7):
    """Outputs and input gradients of ``f(*arrays)`` for a fixed ``gy``, and
    the output variable."""
    variables = [chainer.Variable(a.copy(order='K')) for a in arrays]
    y = f(*variables)
    y.grad = numpy.random.RandomState(gy_seed).standard_normal(
        y.shape).astype(y.dtype)
    y.backward()
    return [y.array] + [v.grad for v in variables], y


def run_double(f, arrays, seed=7):
    """``f(*arrays)``, the inputs' gradients ``gx`` for a random ``gy``,
    and ``d <ggx, gx> / d (inputs, gy)`` for random ``ggx`` (zeros where
    nothing flows back)."""
    rng = numpy.random.RandomState(seed)
    inputs = [chainer.Variable(a.copy(order='K')) for a in arrays]
    y = f(*inputs)
    gy = chainer.Variable(rng.standard_normal(y.shape).astype(y.dtype))
    gxs = chainer.grad([y], inputs, [gy], enable_double_backprop=True)
    ggxs = [chainer.Variable(rng.standard_normal(a.shape).astype(a.dtype))
            for a in arrays]
    ggs = chainer.grad(gxs, inputs + [gy], ggxs)
    return [y.array] + [g.array for g in gxs] + [
        numpy.zeros_like(v.array) if g is None else g.array
        for v, g in zip(inputs + [gy], ggs)]


def assert_same(expected, actual, **tol):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert e.shape == a.shape
        numpy.testing.assert_allclose(a, e, **(tol or TOL32))


def use_kernels(kind, monkeypatch):
    """Run the rest of a test with the C loops of cpu_engine._kernels
    (``'native'``, skipped where not built) or without them (``'numpy'``).
    """
    if kind == 'native':
        if cpu_runtime.kernels is None:
            pytest.skip('cpu_engine._kernels is not built')
    else:
        monkeypatch.setattr(cpu_runtime, 'kernels', None)


KERNELS = ['native', 'numpy']


def assert_prints_ok(code):
    """Runs Python ``code`` in a fresh process; it must print just 'ok'."""
    # before chainer, on NumPy 2
    code = 'import largebatch.chainer_compat\n' + code
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'ok'

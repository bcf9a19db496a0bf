"""The ElementwiseKernels of the GPU path, compiled as C++ with CuPy's
binding of arguments and run on the host against the NumPy code they
mirror, bit for bit; and the registry of kernels is complete."""
import os
import re
import subprocess

import numpy
import pytest

from largebatch import cuda_stack
import kernels
from host_kernels import HostElementwise
from models.final_batch_normalization import FinalBatchNormalization
from models.final_batch_normalization import KEEP_KERNEL
from optimizers.rmsprop_warmup import RMSPROP_WARMUP_KERNEL
from optimizers.rmsprop_warmup import rmsprop_warmup_numpy
from optimizers.weight_decay import WEIGHT_DECAY_KERNEL

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
KERNEL_CALL = re.compile(
    r'cuda\.(elementwise|reduce|raw)\(|(Elementwise|Reduction|Raw)Kernel\(|'
    r'RawModule\(|\.fuse\(|cuda_stack\.elementwise\(')
#: An ElementwiseKernel built without cuda_stack.KERNEL_OPTIONS (FMA).
UNCHECKED_ELEMENTWISE = re.compile(r'cuda\.elementwise\(\*|'
                                   r'ElementwiseKernel\(')


def test_every_module_with_a_kernel_is_in_the_registry():
    files = subprocess.run(['git', 'ls-files', '*.py'], cwd=REPO,
                           capture_output=True, text=True,
                           check=True).stdout.split()
    with_kernels = set()
    for path in files:
        if path.startswith('tests/'):
            continue
        with open(os.path.join(REPO, path)) as f:
            if KERNEL_CALL.search(f.read()):
                with_kernels.add(path[:-3].replace('/', '.'))
    registered = {m for m, _ in kernels.ELEMENTWISE} | {
        m for m, *_ in kernels.RAW}
    assert with_kernels == registered
    assert registered <= set(kernels.GPU_MODULES)


def test_every_elementwise_kernel_is_built_with_the_options():
    """Through cuda_stack.elementwise (the one call that passes the
    options), so that none contracts into FMA."""
    files = subprocess.run(['git', 'ls-files', '*.py'], cwd=REPO,
                           capture_output=True, text=True,
                           check=True).stdout.split()
    unchecked = []
    for path in files:
        if not path.startswith('tests/') and \
                path != 'largebatch/cuda_stack.py':
            with open(os.path.join(REPO, path)) as f:
                if UNCHECKED_ELEMENTWISE.search(f.read()):
                    unchecked.append(path)
    assert unchecked == []


def full(n, value):
    return numpy.full(n, value, numpy.float32)


def test_keep_kernel_is_the_numpy_fold(tmp_path):
    keep = HostElementwise(KEEP_KERNEL, tmp_path)
    rng = numpy.random.RandomState(0)
    link = FinalBatchNormalization(33, micro_batches=3)
    kept = [a.copy() for a in link.kept_statistics]
    for count in (1, 2, 3, 1):
        mean = rng.randn(33).astype(numpy.float32)
        var = rng.uniform(0.1, 2, 33).astype(numpy.float32)
        correction = (32 - 1.) / 32
        link._keep(mean.copy(), var.copy(), correction)
        keep(mean, var, full(33, correction), full(33, count), *kept)
        for got, want in zip(kept, link.kept_statistics):
            numpy.testing.assert_array_equal(got, want)


@pytest.mark.parametrize('alpha_rmsprop', [0.0, 0.7])
def test_rmsprop_warmup_kernel_is_the_numpy_update(tmp_path, alpha_rmsprop):
    update = HostElementwise(RMSPROP_WARMUP_KERNEL, tmp_path)
    rng = numpy.random.RandomState(1)
    n = 257
    theta, g, m, delta = (rng.randn(n).astype(numpy.float32)
                          for _ in range(4))
    m = numpy.abs(m)
    lr, mu1, mu2, eps, alpha_sgd = 0.3, 0.9, 0.99, 1e-8, 0.4
    want = [a.copy() for a in (theta, m, delta)]
    rmsprop_warmup_numpy(want[0], g, want[1], want[2], lr, mu1, mu2,
                         numpy.float32(eps), alpha_sgd, alpha_rmsprop)
    update(g, full(n, lr), full(n, mu1), full(n, mu2), full(n, 1 - mu2),
           full(n, eps), full(n, alpha_sgd), full(n, alpha_rmsprop),
           theta, m, delta)
    for got, expected in zip((theta, m, delta), want):
        numpy.testing.assert_array_equal(got, expected)


def test_weight_decay_kernel_is_numpy_s(tmp_path):
    decay = HostElementwise(WEIGHT_DECAY_KERNEL, tmp_path)
    rng = numpy.random.RandomState(2)
    p, g = (rng.randn(100).astype(numpy.float32) for _ in range(2))
    want = g + numpy.float32(1e-4) * p
    decay(p, full(100, 1e-4), g)
    numpy.testing.assert_array_equal(g, want)


def test_the_start_up_checks_kernel_gives_what_the_check_expects(tmp_path):
    y = numpy.zeros(1, numpy.float32)
    HostElementwise(cuda_stack.CHECK_KERNEL, tmp_path)(full(1, 1), y)
    assert y[0] == 2.5

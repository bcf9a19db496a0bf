"""cpu_engine.cpu_runtime: allocator settings, threads, the on switch."""
import chainer
import numpy
import pytest

from largebatch import errors

import cpu_engine
from cpu_engine import cpu_runtime
from cpu_engine.convolution_2d import Convolution2DFunction
from cpu_engine.max_pooling_2d import MaxPooling2D
from cpu_engine.relu import ReLU
from cpu_engine_helper import assert_prints_ok


def test_configure_keeps_buffers_and_is_idempotent():
    code = ('from cpu_engine import cpu_runtime; '
            's = cpu_runtime.configure(); '
            'assert s is cpu_runtime.configure(); '
            'assert s["M_MMAP_THRESHOLD"] >= 32 << 20, s; print("ok")')
    assert_prints_ok(code)


def test_configure_leaves_numpys_blas_one_thread():
    pytest.importorskip('threadpoolctl')
    if not cpu_engine.onednn.available():
        pytest.skip('oneDNN is not installed')
    code = ('import numpy, threadpoolctl; '
            'from cpu_engine import cpu_runtime; '
            's = cpu_runtime.configure(); '
            'assert s["blas_threads"] == 1, s; '
            'blas = threadpoolctl.threadpool_info(); '
            'assert blas and all(lib["num_threads"] == 1 for lib in blas '
            'if lib["user_api"] == "blas"), blas; print("ok")')
    assert_prints_ok(code)


def test_parallel_for_covers_the_range_once(monkeypatch):
    monkeypatch.setenv('OMP_NUM_THREADS', '3')
    assert cpu_runtime.num_threads() == 3
    hits = numpy.zeros(10, int)

    def mark(lo, hi):
        hits[lo:hi] += 1
    cpu_runtime.parallel_for(mark, 10)
    assert (hits == 1).all()
    cpu_runtime.parallel_for(mark, 1)
    assert hits[0] == 2

    def fail(lo, hi):
        if lo > 0:
            raise RuntimeError('block {}'.format(lo))
    with pytest.raises(RuntimeError, match='block'):
        cpu_runtime.parallel_for(fail, 10)
    monkeypatch.setenv('OMP_NUM_THREADS', 'two')
    with pytest.raises(ValueError, match='OMP_NUM_THREADS'):
        cpu_runtime.num_threads()


@pytest.mark.parametrize('order', ['C', 'F'])
def test_parallel_elementwise_visits_every_element_once(monkeypatch, order):
    """Many L2 blocks over three threads; an F-ordered array is handed over
    whole."""
    monkeypatch.setenv('OMP_NUM_THREADS', '3')
    a = numpy.zeros((301, 1003), order=order)
    b = numpy.asarray(numpy.arange(a.size, dtype=float).reshape(a.shape),
                      order=order)

    def add(a, b):
        a += b + 1
    cpu_runtime.parallel_elementwise(add, a, b)
    numpy.testing.assert_array_equal(a, b + 1)


def test_native_kernels_take_contiguous_float32_only():
    if cpu_runtime.kernels is None:
        pytest.skip('cpu_engine._kernels is not built')
    x = numpy.zeros((4, 6), numpy.float32)
    assert cpu_runtime.native_kernels(x, x) is cpu_runtime.kernels
    assert cpu_runtime.native_kernels(x, x.T) is None
    assert cpu_runtime.native_kernels(x, x.astype(numpy.float64)) is None


def test_fast_paths_switch_off_with_config():
    rng = numpy.random.RandomState(4)
    x = rng.standard_normal((2, 3, 5, 5)).astype(numpy.float32)
    W = rng.standard_normal((2, 3, 3, 3)).astype(numpy.float32)
    assert cpu_runtime.fast_paths_enabled()
    with chainer.using_config('cpu_fast_paths', False):
        assert not cpu_runtime.fast_paths_enabled()
        assert not isinstance(cpu_engine.convolution_2d(x, W).creator,
                              Convolution2DFunction)
        assert not isinstance(cpu_engine.relu(x).creator, ReLU)
        assert not isinstance(cpu_engine.max_pooling_2d(x, 2).creator,
                              MaxPooling2D)
    assert isinstance(cpu_engine.relu(x).creator, ReLU)


def test_works_without_kernels():
    """The package imports and trains when the extension is not built."""
    code = ('import sys; sys.modules["cpu_engine._kernels"] = None; '
            'import chainer, numpy, cpu_engine, optimizers; '
            'assert cpu_engine.cpu_runtime.kernels is None; '
            'x = numpy.arange(96, dtype=numpy.float32).reshape(2, 3, 4, 4); '
            'link = cpu_engine.BatchNormalization(3); '
            'opt = optimizers.RMSpropWarmup(); opt.setup(link); '
            'opt.update(lambda: chainer.functions.sum(link(x) * x)); '
            'print("ok")')
    assert_prints_ok(code)


@pytest.mark.parametrize('value, threads', [('4,2', 4), (' 2 ', 2),
                                            ('1,1,1', 1)])
def test_omp_num_threads_is_read_as_openmp_reads_it(monkeypatch, value,
                                                    threads):
    monkeypatch.setenv('OMP_NUM_THREADS', value)
    assert cpu_runtime.num_threads() == threads


@pytest.mark.parametrize('value', ['abc', '0', '-2', ',3', '2.5'])
def test_a_bad_omp_num_threads_is_one_line(monkeypatch, value):
    monkeypatch.setenv('OMP_NUM_THREADS', value)
    with pytest.raises(errors.InputError) as e:
        cpu_runtime.num_threads()
    assert str(e.value).startswith('OMP_NUM_THREADS={}: expected a positive '
                                   'integer'.format(value.strip()))

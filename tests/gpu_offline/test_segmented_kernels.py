"""The segmented kernels of the GPU path, compiled as C++ and run on NumPy
arrays through the module's own launch code (grids, tables, arguments),
against the CPU path's results, bit for bit."""
import numpy
import pytest

from half_precision import scaling
from half_precision import segmented
from host_kernels import HostKernels


@pytest.fixture(scope='module')
def host(tmp_path_factory):
    return HostKernels(segmented.SOURCE, tmp_path_factory.mktemp('segmented'),
                       segmented.THREADS)


@pytest.fixture
def on_host(host, monkeypatch):
    monkeypatch.setattr(segmented, 'launch', host.launch)


def gradients(seed=0):
    """A mix like ResNet-50's under mixed16: float16 weights of several
    sizes and magnitudes, float32 normalization parameters, an empty array
    and one larger than a grid-stride launch covers in one pass."""
    rng = numpy.random.RandomState(seed)
    shapes = [(3, 5), (0,), (64,), (7, 3, 3, 3), (1,), (segmented.THREADS *
                                                        segmented.MAX_BLOCKS
                                                        + 17,)]
    dtypes = [numpy.float16, numpy.float32, numpy.float32, numpy.float16,
              numpy.float16, numpy.float32]
    scales = [1e-3, 1., 4e-6, 30., 1e-7, 2.]
    return [(rng.standard_normal(shape) * scale).astype(dtype)
            for shape, dtype, scale in zip(shapes, dtypes, scales)]


def test_offsets_are_the_running_sizes():
    arrays = gradients()
    offsets = segmented.offsets(arrays)
    assert offsets[0] == 0 and offsets.dtype == numpy.int64
    assert list(numpy.diff(offsets)) == [a.size for a in arrays]


def test_max_abs_is_the_cpu_path_s_per_array(on_host):
    arrays = gradients()
    arrays[3].flat[4] = numpy.nan
    arrays[2][7] = -numpy.inf
    got = segmented.max_abs(arrays)
    want = numpy.array([scaling.max_abs(a) for a in arrays],
                       numpy.float32)
    numpy.testing.assert_array_equal(got, want)
    assert numpy.isinf(got[2]) and numpy.isinf(got[3]) and got[1] == 0


def packed_on_cpu(arrays, scales):
    """What the mpi_fp16 communicator sends: g * s in float32, rounded to
    float16, in the packed order."""
    return numpy.concatenate([
        (a.astype(numpy.float32) * s).astype(numpy.float16).ravel()
        for a, s in zip(arrays, scales)])


def test_scale_pack_then_unpack_is_the_cpu_path_s(on_host):
    arrays = gradients(1)
    peaks = scaling.maxima(arrays)
    scales = scaling.scales(peaks, 4)
    inverses = scaling.inverses(scales, 4)
    packed = numpy.empty(sum(a.size for a in arrays), numpy.float16)
    segmented.scale_pack(arrays, scales, packed)
    want = packed_on_cpu(arrays, scales)
    numpy.testing.assert_array_equal(packed.view(numpy.uint16),
                                     want.view(numpy.uint16))
    summed = (packed.astype(numpy.float32) * 3).astype(numpy.float16)
    expected = [
        (summed[a:b].astype(numpy.float32) * inv).astype(g.dtype).reshape(
            g.shape) for g, a, b, inv in zip(
                arrays, segmented.offsets(arrays)[:-1],
                segmented.offsets(arrays)[1:], inverses)]
    segmented.unpack(summed, inverses, arrays)
    for got, want in zip(arrays, expected):
        assert got.dtype == want.dtype
        numpy.testing.assert_array_equal(got, want)


def test_round_in_place_is_round_as_worker_s(on_host, monkeypatch):
    arrays = gradients(2)
    on_cpu = [a.copy() for a in arrays]
    scaling.round_as_worker(on_cpu, 96)
    peaks = scaling.maxima(arrays)
    scales = scaling.scales(peaks, 96)
    segmented.round_in_place(arrays, scales, scaling.inverses(scales, 1))
    for got, want in zip(arrays, on_cpu):
        numpy.testing.assert_array_equal(got, want)
    assert any((a != b).any() for a, b in zip(arrays, gradients(2)))


def test_accumulate_adds_into_float32_sums(on_host):
    arrays = gradients(3)
    sums = [numpy.random.RandomState(4).standard_normal(a.shape).astype(
        numpy.float32) for a in arrays]
    want = [s + a.astype(numpy.float32) for s, a in zip(sums, arrays)]
    segmented.accumulate(arrays, sums)
    for got, expected in zip(sums, want):
        numpy.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError):
        segmented.accumulate(arrays, [s.astype(numpy.float16) for s in sums])


def test_divide_rounds_each_quotient_to_its_dtype(on_host):
    arrays = gradients(4)
    sums = [a.astype(numpy.float32) * 48 for a in arrays]
    quotients = [numpy.empty_like(a) for a in arrays]
    segmented.divide(sums, quotients, 48)
    for got, total, a in zip(quotients, sums, arrays):
        want = (total / 48).astype(a.dtype)
        numpy.testing.assert_array_equal(got.view(numpy.uint8),
                                         want.view(numpy.uint8))


def test_count_non_finite_counts_inf_and_nan(on_host):
    packed = numpy.arange(segmented.THREADS * 5, dtype=numpy.float16)
    assert int(segmented.count_non_finite(packed)) == 0
    packed[[0, 3, 700, -1]] = [numpy.inf, -numpy.inf, numpy.nan, 65504]
    assert int(segmented.count_non_finite(packed)) == 3


def test_the_table_refuses_what_the_kernels_cannot_read():
    with pytest.raises(ValueError, match='float16 or float32'):
        segmented.table([numpy.zeros(3)])
    with pytest.raises(ValueError, match='C-contiguous'):
        segmented.table([numpy.zeros((4, 4), numpy.float32)[:, ::2]])


TABLE, MAXIMA = numpy.zeros(3, numpy.int64), numpy.zeros(1, numpy.float32)


@pytest.mark.parametrize('args, expected', [
    ([TABLE, numpy.int64(1), MAXIMA],
     'segmented_max_abs: argument 1 takes int32, got 1 (int64)'),
    ([TABLE, numpy.int32(1), 0.5],
     'segmented_max_abs: argument 2 takes an array (a pointer), got 0.5'),
    ([TABLE, numpy.int32(1)], 'segmented_max_abs takes 3 arguments, got 2'),
])
def test_a_launch_unlike_the_kernels_signature_is_refused(host, args,
                                                          expected):
    """CuPy passes a scalar at its dtype's width: an int64 where the kernel
    reads an int would shift every argument after it on a GPU."""
    with pytest.raises(TypeError) as info:
        host.launch('segmented_max_abs', (1,), args)
    assert str(info.value) == expected

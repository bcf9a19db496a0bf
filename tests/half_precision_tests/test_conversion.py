"""Bit-exactness of the float16 conversions against NumPy's astype."""
import os
import platform
import subprocess
import sys

import numpy
import pytest

from half_precision import conversion
from conftest import REPO

try:
    from half_precision import _half
except ImportError as e:
    _half = None
    _IMPORT_ERROR = str(e)

NO_F16C = 'HALF_PRECISION_NO_F16C'
needs_extension = pytest.mark.skipif(
    _half is None, reason='half_precision._half is not built')


def _float32_cases():
    """Random bit patterns plus every region where float16 rounding acts."""
    rng = numpy.random.RandomState(0)
    u32 = numpy.uint32
    random_bits = rng.randint(0, 2 ** 32, 200000, dtype=numpy.uint64)
    # |x| from below half the smallest subnormal to beyond the overflow
    # threshold, both signs.
    in_range = rng.randint(0x32000000, 0x48000000, 300000).astype(u32)
    in_range |= rng.randint(0, 2, in_range.size).astype(u32) << u32(31)
    # every 7th pattern of the float16 subnormal range and its borders
    subnormal = numpy.arange(0x32f00000, 0x38900000, 7, dtype=u32)
    # exact halfway cases between two float16 normals
    halfway = rng.randint(0x38800000, 0x47800000, 100000).astype(u32)
    halfway = (halfway & ~u32(0x1fff)) | u32(0x1000)
    edges = numpy.array([
        0x00000000, 0x80000000, 0x00000001,  # zeros, tiniest float32
        0x33000000, 0x33000001, 0x33800000,  # 2^-25 (tie to 0), 2^-24
        0x387fc000, 0x387fe000, 0x387ff000,  # largest subnormal, ties
        0x38800000,  # smallest float16 normal
        0x477fe000, 0x477fefff, 0x477ff000,  # 65504, below/at 65520
        0x477ff001, 0x47800000, 0x7f7fffff,  # overflow to inf
        0x7f800000, 0xff800000,  # inf
        0x7fc00000, 0xffc00000, 0x7fffffff,  # quiet NaNs
        0x7f800001, 0x7f801fff, 0x7f802000, 0xff800001,  # signalling NaNs
    ], u32)
    return numpy.concatenate([random_bits.astype(u32), in_range, subnormal,
                              halfway, edges]).view(numpy.float32)


def _all_float16():
    return numpy.arange(2 ** 16, dtype=numpy.uint16).view(numpy.float16)


def _bits(a):
    return a.view(numpy.uint16 if a.dtype == numpy.float16 else numpy.uint32)


@pytest.fixture(params=['extension', 'numpy'])
def backend(request, monkeypatch):
    """The conversions with the extension, or with its NumPy fallback."""
    if request.param == 'extension':
        if _half is None:
            pytest.skip('half_precision._half is not built')
    else:
        monkeypatch.setattr(conversion, '_half', None)
    return conversion


def test_to_float_all_bit_patterns(backend):
    h = _all_float16()
    out = numpy.empty(h.size, numpy.float32)
    backend.to_float(h, out)
    numpy.testing.assert_array_equal(_bits(out),
                                     _bits(h.astype(numpy.float32)))


def test_to_half_rounds_as_numpy(backend):
    x = _float32_cases()
    out = numpy.empty(x.size, numpy.float16)
    with numpy.errstate(over='ignore', invalid='ignore'):
        backend.to_half(x, out)
        expected = x.astype(numpy.float16)
    numpy.testing.assert_array_equal(_bits(out), _bits(expected))


def test_add_half_all_bit_patterns(backend):
    h = numpy.repeat(_all_float16(), 5)
    acc = numpy.resize(numpy.array(
        [1.5, -7e-3, numpy.inf, numpy.nan, 65504.], numpy.float32), h.size)
    with numpy.errstate(over='ignore', invalid='ignore'):
        expected = acc + h.astype(numpy.float32)
        backend.add_half(acc, h)
    # NaN + NaN keeps one of the two payloads; which, NumPy's own loops
    # do not agree on, so only finite results are compared bit for bit.
    finite = numpy.isfinite(expected)
    numpy.testing.assert_array_equal(_bits(acc)[finite],
                                     _bits(expected)[finite])
    numpy.testing.assert_array_equal(numpy.isnan(acc), numpy.isnan(expected))
    numpy.testing.assert_array_equal(acc[~finite], expected[~finite])


def test_to_float_scaled_is_one_float32_product(backend):
    h = _all_float16()
    finite = numpy.isfinite(h)
    for scale in (numpy.float32(2. ** -7), numpy.float32(1. / 3),
                  numpy.float32(2. ** 90)):
        out = numpy.empty(h.size, numpy.float32)
        with numpy.errstate(over='ignore', invalid='ignore'):
            backend.to_float_scaled(h, out, scale)
            expected = h.astype(numpy.float32) * scale
        numpy.testing.assert_array_equal(_bits(out)[finite],
                                         _bits(expected)[finite])
        numpy.testing.assert_array_equal(numpy.isnan(out),
                                         numpy.isnan(expected))


def test_max_abs_with_non_finite_as_inf(backend):
    x = _float32_cases()
    finite = x[numpy.isfinite(x)]
    assert backend.max_abs(finite) == numpy.abs(finite).max()
    for n in (0, 1, 7, 8, 15, 16, 17, 1001):
        part = finite[-n:] if n else finite[:0]
        expected = float(numpy.abs(part).max()) if n else 0.
        assert backend.max_abs(part) == expected, n
        assert backend.max_abs(part[::2]) == (
            float(numpy.abs(part[::2]).max()) if n else 0.), n
    for bad in (numpy.inf, -numpy.inf, numpy.nan):
        y = finite[:1001].copy()
        y[500] = bad
        assert backend.max_abs(y) == numpy.inf
    with pytest.raises(ValueError, match='max_abs: src must be a numpy'):
        backend.max_abs(numpy.zeros(3))


def test_non_contiguous_and_odd_lengths(backend):
    x = _float32_cases()[:2 * 1001:2]  # strided, not a multiple of 8
    out = numpy.empty(x.size, numpy.float16)
    with numpy.errstate(over='ignore', invalid='ignore'):
        backend.to_half(x, out)
        numpy.testing.assert_array_equal(
            _bits(out), _bits(x.astype(numpy.float16)))
    back = numpy.empty((13,), numpy.float32)
    backend.to_float(out[:13], back)
    numpy.testing.assert_array_equal(
        _bits(back), _bits(out[:13].astype(numpy.float32)))


@pytest.mark.parametrize('call, message', [
    (lambda m: m.to_half(numpy.zeros(4), numpy.zeros(4, numpy.float16)),
     'to_half: src must be a numpy.ndarray of float32'),
    (lambda m: m.to_half(numpy.zeros(4, numpy.float32),
                         numpy.zeros(3, numpy.float16)),
     'to_half: src has shape'),
    (lambda m: m.add_half(numpy.zeros(4, numpy.float32),
                          numpy.zeros(4, numpy.uint16)),
     'add_half: half must be a numpy.ndarray of float16'),
    (lambda m: m.to_float(numpy.zeros(4, numpy.float16), [0.] * 4),
     'to_float: out must be a numpy.ndarray of float32'),
])
def test_wrapper_rejects_bad_arrays(backend, call, message):
    with pytest.raises(ValueError, match=message):
        call(backend)


@needs_extension
@pytest.mark.parametrize('call, message', [
    (lambda: _half.to_half(numpy.zeros(4), numpy.zeros(4, numpy.float16)),
     r"to_half: src must hold float32 \(format 'f'\), got format 'd'"),
    (lambda: _half.to_half(numpy.zeros(4, numpy.float32),
                           numpy.zeros(5, numpy.float16)),
     'to_half: src has 4 elements but out has 5'),
    (lambda: _half.add_half(numpy.zeros(4, numpy.float32),
                            numpy.zeros(4, numpy.uint16)),
     'add_half: half must hold float16'),
    (lambda: _half.add_half(numpy.zeros(8, numpy.float32)[::2],
                            numpy.zeros(4, numpy.float16)),
     'add_half: acc must be C-contiguous'),
    (lambda: _half.to_float(numpy.zeros(4, numpy.float16),
                            numpy.zeros(4, numpy.float32).view('>f4')),
     'to_float: out must hold float32'),
    (lambda: _half.to_float(numpy.zeros(4, numpy.float16),
                            numpy.frombuffer(bytes(16), numpy.float32)),
     'to_float: out must be a writable buffer of float32'),
    (lambda: _half.to_float(numpy.zeros(4, numpy.float16), 3.),
     'to_float: out must be a writable buffer of float32, got float'),
    (lambda: _half.to_half(numpy.zeros(4, numpy.float32)),
     'to_half expected 2 arguments'),
])
def test_extension_rejects_bad_buffers(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def test_extension_was_built():
    if _half is None:
        pytest.skip('half_precision._half was not built here (no C compiler '
                    'when installing?): ' + _IMPORT_ERROR)
    assert conversion.NATIVE
    if platform.machine() in ('x86_64', 'AMD64') and not os.environ.get(
            NO_F16C):
        with open('/proc/cpuinfo') as f:
            has_f16c = ' f16c' in f.read()
        assert _half.uses_f16c == has_f16c


@needs_extension
@pytest.mark.skipif(bool(os.environ.get(NO_F16C)), reason='already portable')
def test_portable_loops_bit_exact():
    """The extension's plain C loops, forced on: every test above again."""
    env = dict(os.environ, **{NO_F16C: '1'})
    env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
    check = subprocess.run(
        [sys.executable, '-c',
         'import largebatch.chainer_compat; from half_precision import _half; '
         'assert not _half.uses_f16c'],
        cwd=REPO, env=env)
    assert check.returncode == 0
    proc = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
         '-k', 'extension and not was_built', os.path.abspath(__file__)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True)
    assert proc.returncode == 0, proc.stdout

"""half_precision.scaling: the scales, the maxima, and a worker's
rounding."""
import numpy

from half_precision import scaling


def test_scales_are_the_largest_powers_of_two_below_the_limit():
    peaks = numpy.array([1., 3e-7, 4e4, 65504., 1e-20], numpy.float32)
    for p in (1, 2, 3, 4, 8, 1024):
        s = scaling.scales(peaks, p).astype(numpy.float64)
        limit = 65504. / (1 + 2. ** -11) ** p
        assert s.dtype == numpy.float64
        mantissa, _ = numpy.frexp(s)
        assert (mantissa == 0.5).all(), s  # powers of two
        worst = p * peaks.astype(numpy.float64) * s
        assert (worst <= limit).all() and (2 * worst > limit).all(), (p, s)


def test_scale_is_one_for_zero_and_non_finite_peaks():
    peaks = numpy.array([0., numpy.inf, numpy.nan], numpy.float32)
    assert (scaling.scales(peaks, 4) == 1).all()


def test_scales_stay_within_the_exponent_limit():
    limit = scaling.EXPONENT_LIMIT
    s = scaling.scales(numpy.array([1e-38, 3e38], numpy.float32), 2)
    assert list(s) == [2. ** limit, 2. ** -limit]
    assert numpy.isfinite(scaling.inverses(s, 2 ** 19)).all()


def test_inverses_undo_scale_and_summands():
    s = numpy.array([2. ** 10, 2. ** -3], numpy.float32)
    assert list(scaling.inverses(s, 4)) == [2. ** -12, 2. ** 1]
    assert scaling.inverses(s, 3).dtype == numpy.float32


def test_maxima_of_float32_and_float16_with_non_finite_as_inf():
    grads = [numpy.array([1., -7., 2.], numpy.float32),
             numpy.array([-0.5, 0.25], numpy.float16),
             numpy.array([1., numpy.nan], numpy.float32),
             numpy.array([numpy.nan, 1.], numpy.float16),
             numpy.arange(12, dtype=numpy.float32).reshape(3, 4)[:, 1],
             numpy.zeros(0, numpy.float32)]
    peaks = scaling.maxima(grads)
    assert peaks.dtype == numpy.float32
    assert list(peaks) == [7., 0.5, numpy.inf, numpy.inf, 9., 0.]


def test_round_as_worker_rounds_the_scaled_gradient_to_float16():
    rng = numpy.random.RandomState(0)
    g = (rng.standard_normal(1000) * 10. ** rng.uniform(-9, 0, 1000)
         ).astype(numpy.float32)
    g16 = g.astype(numpy.float16)
    before, before16 = g.copy(), g16.copy()
    scaling.round_as_worker([g, None, g16], 64)
    s = scaling.scales(scaling.maxima([before]), 64)[0]
    expected = (before * s).astype(numpy.float16).astype(numpy.float32) / s
    numpy.testing.assert_array_equal(g, expected)
    s16 = scaling.scales(scaling.maxima([before16]), 64)[0]
    expected16 = ((before16.astype(numpy.float32) * s16)
                  .astype(numpy.float16).astype(numpy.float32) / s16)
    numpy.testing.assert_array_equal(g16, expected16.astype(numpy.float16))
    # in float16's normal range after scaling the rounding is float16's
    normal = numpy.abs(before * s) >= 2. ** -14
    assert normal.sum() > 500
    numpy.testing.assert_allclose(g[normal], before[normal], rtol=2. ** -11)


def test_finite_by_construction_only_for_finite_unclipped_peaks():
    for p in (2, 3, 1024):
        peaks = numpy.array([1e-3, 4e4, 0.], numpy.float32)
        scales = scaling.scales(peaks, p)
        assert scaling.finite_by_construction(peaks, scales, p)
        for bad in (numpy.inf, numpy.nan, 3e38):
            peaks[1] = bad
            assert not scaling.finite_by_construction(
                peaks, scaling.scales(peaks, p), p), (p, bad)


def test_a_sum_of_scaled_float16_gradients_stays_finite():
    """The worst case: every worker at the peak, every rounding upwards."""
    for p in (2, 3, 7, 1024):
        peak = numpy.float32(65504.)
        s = scaling.scales(numpy.array([peak]), p)[0]
        total = numpy.float16(peak * s)
        for _ in range(p - 1):
            exact = numpy.float32(total) + peak * s
            total = numpy.float16(exact)
            if numpy.float32(total) < exact:  # round up instead
                total = numpy.nextafter(total, numpy.float16(numpy.inf))
        assert numpy.isfinite(total), p

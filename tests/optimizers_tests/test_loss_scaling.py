import pytest

from optimizers.loss_scaling import DynamicLossScale


def test_overflow_halves_and_clean_steps_double_after_interval():
    s = DynamicLossScale(scale=1024, interval=3)
    assert s.back_off()
    assert (s.scale, s.overflows, s.clean_steps) == (512, 1, 0)
    s.grow()
    s.grow()
    assert s.scale == 512 and s.clean_steps == 2
    assert s.back_off()  # an overflow restarts the count
    assert (s.scale, s.clean_steps) == (256, 0)
    for _ in range(3):
        s.grow()
    assert (s.scale, s.clean_steps, s.overflows) == (512, 0, 2)


def test_bounds():
    s = DynamicLossScale(scale=2, interval=1, min_scale=1, max_scale=4)
    s.grow()
    s.grow()
    assert s.scale == 4
    assert s.back_off() and s.back_off()
    assert s.scale == 1
    assert not s.back_off()  # at the minimum: a divergence, nothing changes
    assert (s.scale, s.overflows) == (1, 2)
    with pytest.raises(ValueError):
        DynamicLossScale(scale=0.5)
    with pytest.raises(ValueError):
        DynamicLossScale(interval=0)


def test_serialize_round_trip():
    import chainer
    s = DynamicLossScale(scale=1024, interval=5)
    s.back_off()
    s.grow()
    saved = chainer.serializers.DictionarySerializer()
    s.serialize(saved)
    t = DynamicLossScale()
    t.serialize(chainer.serializers.NpzDeserializer(saved.target))
    assert (t.scale, t.clean_steps, t.overflows) == (512, 1, 1)

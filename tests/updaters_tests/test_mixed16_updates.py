"""MicroBatchUpdater with dynamic loss scaling on a float16 model."""
import chainer
import chainer.links as L
import numpy
import pytest

from largebatch.errors import NonFiniteGradientError
from models.mixed_precision import MixedPrecision
from optimizers import fp32_masters
from optimizers import NonFiniteGradientGuard
from optimizers.loss_scaling import DynamicLossScale
import updaters

OVERFLOW_AT = 3  # the update whose batch overflows float16


@pytest.fixture
def mixed16():
    with chainer.using_config('dtype', chainer.mixed16):
        yield


def batches(n, huge_at=None):
    rng = numpy.random.RandomState(0)
    data = []
    for i in range(1, n + 1):
        x = rng.randn(4, 3).astype(numpy.float32)
        if i == huge_at:
            x *= 6e4  # its weight gradient overflows float16
        data += [(xi, numpy.int32(i % 2)) for xi in x]
    return data


def make_trainer(data, loss_scale, on_non_finite='stop'):
    numpy.random.seed(0)
    model = L.Classifier(MixedPrecision(L.Linear(3, 2)))
    optimizer = chainer.optimizers.MomentumSGD(lr=0.1)
    optimizer.setup(model)
    optimizer.use_fp32_update()
    optimizer.add_hook(NonFiniteGradientGuard())
    it = chainer.iterators.SerialIterator(data, 4, shuffle=False)
    updater = updaters.MicroBatchUpdater(
        it, optimizer, chainer.dataset.concat_examples, -1,
        on_non_finite=on_non_finite, loss_scale=loss_scale)
    return model, updater


def step(updater, model):
    """One update; returns what it reported."""
    observation = {}
    reporter = chainer.reporter.Reporter()
    reporter.add_observer('main', model)
    with reporter.scope(observation):
        updater.update()
    return observation


def test_overflow_halves_the_scale_skips_the_update_and_grows_back(mixed16):
    scale = DynamicLossScale(scale=2 ** 12, interval=2)
    model, updater = make_trainer(batches(8, OVERFLOW_AT), scale)
    W = model.predictor.network.W
    assert W.dtype == numpy.float16
    seen = []
    for i in range(1, 9):
        before = W.array.copy()
        observation = step(updater, model)
        seen.append((observation['loss_scale'], scale.scale,
                     observation['overflows']))
        if i == OVERFLOW_AT:
            numpy.testing.assert_array_equal(W.array, before)  # skipped
        else:
            assert (W.array != before).any()
        assert numpy.isfinite(W.array).all()
    assert seen[OVERFLOW_AT - 1] == (2 ** 13, 2 ** 12, 1)
    # Doubled after every 2 clean updates, before the overflow and after it.
    assert [s for _, s, _ in seen] == [2 ** 12, 2 ** 13, 2 ** 12, 2 ** 12,
                                       2 ** 13, 2 ** 13, 2 ** 14, 2 ** 14]
    assert updater.skipped_updates == 0


def test_scaled_update_equals_the_unscaled_one(mixed16):
    # Powers of two scale and unscale exactly: the float32 masters follow
    # the same path at any scale that does not overflow.
    results = []
    for s in (1, 2 ** 8):
        model, updater = make_trainer(batches(3), DynamicLossScale(
            scale=s, interval=100))
        for _ in range(3):
            step(updater, model)
        rule = model.predictor.network.W.update_rule
        results.append(rule._fp32_param.array.copy())
    numpy.testing.assert_array_equal(*results)


def test_overflow_at_the_minimum_scale_is_a_divergence(mixed16):
    model, updater = make_trainer(batches(3, huge_at=1),
                                  DynamicLossScale(scale=1))
    with pytest.raises(NonFiniteGradientError, match='at iteration 1'):
        step(updater, model)


def test_snapshot_keeps_the_scale_and_the_float32_masters(mixed16):
    data = batches(6, OVERFLOW_AT)
    model, updater = make_trainer(data, DynamicLossScale(2 ** 12, 2))
    for _ in range(4):
        step(updater, model)
    saved = chainer.serializers.DictionarySerializer()
    updater.serialize(saved)
    snapshot = {k: numpy.array(v) for k, v in saved.target.items()}  # copies
    assert snapshot['loss_scale/scale'] == 2 ** 12
    assert snapshot['loss_scale/overflows'] == 1
    master = snapshot['optimizer:main/predictor/network/W/fp32_param']
    assert master.dtype == numpy.float32
    for _ in range(2):
        step(updater, model)

    resumed_model, resumed = make_trainer(data, DynamicLossScale())
    resumed.serialize(chainer.serializers.NpzDeserializer(snapshot))
    for _ in range(2):
        step(resumed, resumed_model)
    for a, b in zip(model.params(), resumed_model.params()):
        numpy.testing.assert_array_equal(a.array, b.array)
    numpy.testing.assert_array_equal(
        model.predictor.network.W.update_rule._fp32_param.array,
        resumed_model.predictor.network.W.update_rule._fp32_param.array)


def test_masters_are_not_written_for_float32_models():
    model = L.Linear(3, 2)
    optimizer = chainer.optimizers.SGD().setup(model)
    optimizer.use_fp32_update()
    saved = chainer.serializers.DictionarySerializer()
    fp32_masters.serialize(optimizer, saved)
    assert saved.target == {}

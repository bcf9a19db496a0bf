"""Schedules against values computed by hand from the paper's equations."""
import functools
import math

import pytest

from optimizers import schedules

BELOW = 1e-9  # distance of the "just before a boundary" points


def approx(value):
    return pytest.approx(value, rel=1e-12, abs=1e-15)


def test_linear_scaling_lr():
    assert schedules.linear_scaling_lr(256) == approx(0.1)
    assert schedules.linear_scaling_lr(32768) == approx(12.8)
    assert schedules.linear_scaling_lr(8192) == approx(3.2)
    assert schedules.linear_scaling_lr(512, lr_per_256=0.2) == approx(0.4)


def test_constant_lr():
    assert schedules.constant_lr(0, 32768) == approx(12.8)
    assert schedules.constant_lr(89.5, 32768) == approx(12.8)
    assert schedules.constant_lr(3, 32768, base_lr=2.0) == approx(2.0)


@pytest.mark.parametrize('epoch, lr', [
    (0, 6.4), (20, 6.4), (40 - BELOW, 6.4),
    (40, 0.96), (55, 0.96), (70 - BELOW, 0.96),
    (70, 0.128), (84, 0.128), (85 - BELOW, 0.128),
    (85, 0.0128), (89.99, 0.0128), (90, 0.0128),
])
def test_slow_start_lr_at_32k(epoch, lr):
    # eta_base = 0.1 x 32768 / 256 = 12.8; x0.5, x0.075, x0.01, x0.001
    assert schedules.slow_start_lr(epoch, 32768) == approx(lr)


@pytest.mark.parametrize('epoch, factor', [
    (0, 0.5), (4 - BELOW, 0.5), (4, 0.075), (7 - BELOW, 0.075),
    (7, 0.01), (8.5 - BELOW, 0.01), (8.5, 0.001), (9, 0.001),
])
def test_slow_start_lr_scaled_to_9_epochs(epoch, factor):
    # 40, 70, 85 of 90 epochs -> 4, 7, 8.5 of 9 epochs
    assert schedules.slow_start_lr(epoch, 1024, epochs=9) == approx(
        0.4 * factor)


def test_slow_start_lr_base_override():
    assert schedules.slow_start_lr(0, 32768, base_lr=1.0) == approx(0.5)
    assert schedules.slow_start_lr(86, 32768, base_lr=1.0) == approx(0.001)


@pytest.mark.parametrize('epoch, lr', [
    # linear warm-up 0.1 -> 3.2 over 5 epochs: 0.1 + 3.1 x e / 5
    (0, 0.1), (1, 0.72), (2.5, 1.65), (5 - BELOW, 3.2),
    (5, 3.2), (29, 3.2), (30 - BELOW, 3.2),
    (30, 0.32), (60 - BELOW, 0.32), (60, 0.032), (80 - BELOW, 0.032),
    (80, 0.0032), (89.9, 0.0032),
])
def test_goyal_lr_at_8k(epoch, lr):
    assert schedules.goyal_lr(epoch, 8192) == pytest.approx(lr, rel=1e-7)


@pytest.mark.parametrize('epoch, lr', [
    # 5, 30, 60, 80 of 90 epochs -> 0.5, 3, 6, 8 of 9; warm-up 0.1 -> 3.2
    (0, 0.1), (0.25, 1.65), (0.5, 3.2), (3 - BELOW, 3.2), (3, 0.32),
    (6 - BELOW, 0.32), (6, 0.032), (8 - BELOW, 0.032), (8, 0.0032),
])
def test_goyal_lr_scaled_to_9_epochs(epoch, lr):
    assert schedules.goyal_lr(epoch, 8192, epochs=9) == pytest.approx(
        lr, rel=1e-7)


def test_goyal_lr_small_minibatch_has_no_warmup():
    # At <= 256 images the warm-up would start above its target: it is flat.
    for epoch in (0, 2.5, 4.9, 5, 29):
        assert schedules.goyal_lr(epoch, 128) == approx(0.05)


def test_goyal_lr_base_override():
    # starts at base x 256 / total = 0.25, reaches base = 2.0 at epoch 5
    assert schedules.goyal_lr(0, 2048, base_lr=2.0) == approx(0.25)
    assert schedules.goyal_lr(2.5, 2048, base_lr=2.0) == approx(1.125)
    assert schedules.goyal_lr(31, 2048, base_lr=2.0) == approx(0.2)


@pytest.mark.parametrize('epoch, value', [
    (0, 0.5 * math.exp(-4)),            # 0.5 exp(2 (0 - 10) / 5)
    (5, 0.5 * math.exp(-2)),
    (9, 0.5 * math.exp(-0.4)),
    (10 - BELOW, 0.5), (10, 0.5),
    (11, 0.7),                          # 0.5 + (11 - 10) / 5
    (12, 0.9), (12.5 - BELOW, 1.0),
    (12.5, 1.0), (20, 1.0), (90, 1.0),
])
def test_alpha_sgd_elu(epoch, value):
    assert schedules.alpha_sgd(epoch) == pytest.approx(value, rel=1e-8)


@pytest.mark.parametrize('epoch, value', [
    (0, 0.5 * math.exp(-4)), (10, 0.5),
    (11, 0.9),                          # 0.5 + 2 (11 - 10) / 5
    (12, 1.3), (12.5 - BELOW, 1.5),     # overshoot ...
    (12.5, 1.0), (30, 1.0),             # ... and the fall back to 1
])
def test_alpha_sgd_double_slope(epoch, value):
    assert schedules.alpha_sgd(epoch, form='double-slope') == pytest.approx(
        value, rel=1e-8)


def test_alpha_sgd_elu_is_c1_at_the_center():
    h = 1e-6
    left = (schedules.alpha_sgd(10) - schedules.alpha_sgd(10 - h)) / h
    right = (schedules.alpha_sgd(10 + h) - schedules.alpha_sgd(10)) / h
    assert left == pytest.approx(1 / 5, rel=1e-4)
    assert right == pytest.approx(1 / 5, rel=1e-4)


def test_alpha_sgd_other_center_and_period():
    # the 90-epoch warm-up laid out for 9 epochs: centre 1, period 0.5
    assert schedules.alpha_sgd(0, 1.0, 0.5) == pytest.approx(
        0.5 * math.exp(-4))
    assert schedules.alpha_sgd(1.1, 1.0, 0.5) == pytest.approx(0.7)
    assert schedules.alpha_sgd(1.25, 1.0, 0.5) == 1.0


def test_alpha_sgd_rejects_bad_input():
    with pytest.raises(ValueError, match='form'):
        schedules.alpha_sgd(0, form='linear')
    with pytest.raises(ValueError, match='period'):
        schedules.alpha_sgd(0, period=0)


def test_alpha_rmsprop():
    # (1 - alpha_sgd) x lr_rmsprop / lr
    assert schedules.alpha_rmsprop(0.5, 0.1) == approx(1.5e-3)
    assert schedules.alpha_rmsprop(0.0, 6.4, 3e-4) == approx(3e-4 / 6.4)
    assert schedules.alpha_rmsprop(1.0, 6.4) == 0.0
    # the double-slope overshoot does not make the RMSprop step negative
    assert schedules.alpha_rmsprop(1.3, 6.4) == 0.0


def test_poly_lr_warms_up_linearly_then_decays_to_zero():
    lr = functools.partial(schedules.poly_lr, total_batchsize=256,
                           epochs=90, base_lr=2.0, warmup_epochs=5, power=2)
    assert lr(0) == 0
    assert lr(2.5) == pytest.approx(1.0)
    assert lr(5) == pytest.approx(2.0)
    assert lr(47.5) == pytest.approx(2.0 * 0.5 ** 2)
    assert lr(90) == 0
    assert lr(95) == 0
    scaled = schedules.poly_lr(0.5, 256, epochs=9, base_lr=2.0,
                               warmup_epochs=5)  # warm-up 0.5 epochs
    assert scaled == pytest.approx(2.0)


def test_square_root_scaling_lr():
    assert schedules.square_root_scaling_lr(64) == pytest.approx(1.0)
    assert schedules.square_root_scaling_lr(32768) == pytest.approx(
        2 * 32768 ** 0.5 / 16)

"""Learning-rate and warm-up schedules: pure functions of the fractional epoch.

``epoch`` is the fractional epoch (iteration x total minibatch / training-set
size), so a schedule changes every iteration, never once per integer epoch.
Epoch boundaries are laid out for a 90-epoch run; passing ``epochs`` lays
them out for a run of that length instead (each boundary times epochs / 90),
which keeps the schedule's shape in shorter or longer studies.
"""
import math

REFERENCE_EPOCHS = 90
LR_PER_256 = 0.1
# Akiba et al.: (first epoch, multiple of the linear-scaling lr).
SLOW_START_STEPS = ((0, 0.5), (40, 0.075), (70, 0.01), (85, 0.001))
# Goyal et al.: gradual warm-up length, epochs of the x0.1 drops.
GOYAL_WARMUP_EPOCHS = 5
GOYAL_DROP_EPOCHS = (30, 60, 80)
GOYAL_DROP_FACTOR = 0.1
# 'elu': linear branch 0.5 + (e - c) / p, C1 at c and equal to 1 at c + p/2;
# 'double-slope': the other transcription, 0.5 + 2 (e - c) / p, which
# overshoots to 1.5 and falls back to 1 at c + p/2.
ALPHA_SGD_SLOPES = {'elu': 1.0, 'double-slope': 2.0}


def _rescale(boundary, epochs):
    """A boundary of the 90-epoch layout, moved into a run of ``epochs``."""
    return boundary * epochs / REFERENCE_EPOCHS


def linear_scaling_lr(total_batchsize, lr_per_256=LR_PER_256):
    """The linear scaling rule: ``lr = 0.1 x total minibatch / 256``."""
    return lr_per_256 * total_batchsize / 256


def square_root_scaling_lr(total_batchsize, lr_per_256=2.0):
    """LARS's default peak: ``lr = 2 x sqrt(total minibatch / 256)``.

    LARS normalizes every step by the array's norm, so its learning rate
    grows far slower than the linear rule: this gives 1 at 64 images, 22.6
    at 32,768 and 29.9 at 57,344 (NVIDIA's MLPerf ResNet-50 uses 23 there).
    """
    return lr_per_256 * math.sqrt(total_batchsize / 256)


def constant_lr(epoch, total_batchsize, epochs=REFERENCE_EPOCHS,
                base_lr=None):
    """``base_lr`` (by default the linear-scaling lr) at every epoch."""
    if base_lr is None:
        base_lr = linear_scaling_lr(total_batchsize)
    return base_lr


def slow_start_lr(epoch, total_batchsize, epochs=REFERENCE_EPOCHS,
                  base_lr=None):
    """Akiba et al.'s slow-start learning rate.

    ``base_lr`` (by default the linear-scaling lr) times 0.5 on [0, 40),
    0.075 on [40, 70), 0.01 on [70, 85) and 0.001 from 85 epochs on.
    """
    if base_lr is None:
        base_lr = linear_scaling_lr(total_batchsize)
    factor = SLOW_START_STEPS[0][1]
    for start, step_factor in SLOW_START_STEPS[1:]:
        if epoch >= _rescale(start, epochs):
            factor = step_factor
    return factor * base_lr


def goyal_lr(epoch, total_batchsize, epochs=REFERENCE_EPOCHS, base_lr=None):
    """Goyal et al.'s gradual warm-up and step schedule.

    Over the first 5 epochs the lr rises linearly from the lr of a 256-image
    minibatch (``base_lr x 256 / total``; ``base_lr`` itself when the total
    is at most 256) to ``base_lr`` (by default the linear-scaling lr), then
    it is multiplied by 0.1 at 30, 60 and 80 epochs.
    """
    if base_lr is None:
        base_lr = linear_scaling_lr(total_batchsize)
    warmup = _rescale(GOYAL_WARMUP_EPOCHS, epochs)
    if epoch < warmup:
        start_lr = base_lr * min(1.0, 256 / total_batchsize)
        return start_lr + (base_lr - start_lr) * epoch / warmup
    drops = sum(1 for boundary in GOYAL_DROP_EPOCHS
                if epoch >= _rescale(boundary, epochs))
    return base_lr * GOYAL_DROP_FACTOR ** drops


def poly_lr(epoch, total_batchsize, epochs=REFERENCE_EPOCHS, base_lr=None,
            warmup_epochs=5.0, power=2.0):
    """Linear warm-up, then polynomial decay to 0 (You et al. 2017; MLPerf).

    ``base_lr x e / w`` for the first ``w = warmup_epochs`` (laid out for
    90 epochs, as every boundary here), then
    ``base_lr x (1 - (e - w) / (epochs - w)) ** power`` down to 0 at the end
    of the run. ``base_lr`` is by default the linear-scaling lr.
    """
    if base_lr is None:
        base_lr = linear_scaling_lr(total_batchsize)
    warmup = _rescale(warmup_epochs, epochs)
    if epoch < warmup:
        return base_lr * epoch / warmup
    remaining = max(0.0, 1 - (epoch - warmup) / (epochs - warmup))
    return base_lr * remaining ** power


def alpha_sgd(epoch, center=10.0, period=5.0, form='elu'):
    """Weight of the SGD step in RMSprop warm-up (Akiba et al.).

    ``0.5 exp(2 (e - center) / period)`` before ``center``, then a linear
    rise from 0.5 (slope ``1 / period`` for ``form='elu'``, ``2 / period``
    for ``'double-slope'``) until ``center + period / 2``, then 1.
    """
    if form not in ALPHA_SGD_SLOPES:
        raise ValueError('alpha_sgd form must be one of {}, got {!r}'.format(
            ', '.join(sorted(ALPHA_SGD_SLOPES)), form))
    if period <= 0:
        raise ValueError('alpha_sgd period must be positive, got {}'
                         .format(period))
    if epoch < center:
        return 0.5 * math.exp(2 * (epoch - center) / period)
    if epoch < center + period / 2:
        return 0.5 + ALPHA_SGD_SLOPES[form] * (epoch - center) / period
    return 1.0


def alpha_rmsprop(alpha_sgd_value, lr, lr_rmsprop=3e-4):
    """Weight of the RMSprop step: ``(1 - alpha_sgd) x lr_rmsprop / lr``.

    The RMSprop step ``lr x alpha_rmsprop`` is then ``lr_rmsprop`` times the
    share ``1 - alpha_sgd`` that SGD has not taken over yet. That share is
    clipped at 0, so the overshoot of the 'double-slope' form above 1 does
    not turn the RMSprop step into an ascent.
    """
    return max(0.0, 1 - alpha_sgd_value) * lr_rmsprop / lr

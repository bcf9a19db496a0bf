"""Optimization recipes, resolved once into an immutable :class:`Recipe`.

A recipe names the update rule, the learning-rate schedule, the warm-up,
weight decay and its exemptions, momentum correction and the zero-init of
residual blocks; every part can be overridden on its own::

    recipe = recipes.resolve('akiba2017', epochs=90, weight_decay=0)
    optimizer = chainermn.create_multi_node_optimizer(
        recipes.create_optimizer(recipe), comm)
    optimizer.setup(model)
    recipes.add_hooks(optimizer, recipe)        # after setup
    extensions.add_schedules(trainer, recipes.hyperparameter_schedules(
        recipe, total_batchsize), optimizer)

- ``akiba2017``: RMSprop warm-up and the slow-start learning rate.
- ``goyal2017``: momentum SGD with momentum correction (Chainer's
  ``CorrectedMomentumSGD``), 5-epoch gradual
  warm-up, x0.1 at 30/60/80 epochs, no decay of normalization gamma/beta,
  zero-init of the last BN gamma of every residual block.
- ``sgd``: Chainer's momentum SGD at the linear-scaling learning rate.
- ``you2017``: LARS (You, Gitman & Ginsburg 2017) on Chainer's momentum
  SGD, linear warm-up over 5 epochs then poly(2) decay to 0, normalization
  parameters and biases exempt from LARS and weight decay, label smoothing
  0.1 (as MLPerf's ResNet-50).
"""
import dataclasses
import functools
import math
import typing

import chainer
import chainermn

from largebatch.errors import ParameterError
from optimizers import schedules
from optimizers.corrected_momentum_sgd import CorrectedMomentumSGD
from optimizers.lars import LARS
from optimizers.loss_scaling import DynamicLossScale
from optimizers.non_finite_guard import NonFiniteGradientGuard
from optimizers.rmsprop_warmup import RMSpropWarmup
from optimizers.weight_decay import BIAS_PARAMS
from optimizers.weight_decay import NORMALIZATION_PARAMS
from optimizers.weight_decay import WeightDecay

OPTIMIZERS = ('rmsprop-warmup', 'momentum-sgd')
LR_SCHEDULES = {
    'slow-start': schedules.slow_start_lr,
    'goyal': schedules.goyal_lr,
    'constant': schedules.constant_lr,
    'poly': schedules.poly_lr,
}
WEIGHT_DECAY_EXEMPT = {
    'none': (),
    'bn': NORMALIZATION_PARAMS,
    'bn-bias': NORMALIZATION_PARAMS + BIAS_PARAMS,
}
# Settings of the RMSprop warm-up only, and their defaults.
RMSPROP_WARMUP_DEFAULTS = dict(lr_rmsprop=3e-4, mu2=0.99, eps=1e-8,
                               warmup_center=10.0, warmup_period=5.0,
                               alpha_sgd_form='elu')
# Settings of the poly schedule only, and their defaults.
POLY_DEFAULTS = dict(warmup_epochs=5.0, poly_power=2.0)
# Settings of mixed precision only, and their defaults.
MIXED16_DEFAULTS = dict(loss_scale=2.0 ** 10, loss_scale_interval=1000)
DTYPES = ('float32', 'mixed16')
COMMON_DEFAULTS = dict(lr=None, momentum=0.9, weight_decay=1e-4,
                       scale_schedule=False, lars=False, lars_eta=0.001,
                       label_smoothing=0.0, dtype='float32')
RECIPES = {
    'akiba2017': dict(optimizer='rmsprop-warmup', momentum_correction=True,
                      lr_schedule='slow-start', weight_decay_exempt='none',
                      zero_init_residual=False),
    'goyal2017': dict(optimizer='momentum-sgd', momentum_correction=True,
                      lr_schedule='goyal', weight_decay_exempt='bn',
                      zero_init_residual=True),
    'sgd': dict(optimizer='momentum-sgd', momentum_correction=False,
                lr_schedule='constant', weight_decay_exempt='none',
                zero_init_residual=False),
    'you2017': dict(optimizer='momentum-sgd', momentum_correction=False,
                    lr_schedule='poly', weight_decay_exempt='bn-bias',
                    zero_init_residual=False, lars=True,
                    label_smoothing=0.1),
}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Every setting of a recipe, resolved (see :func:`resolve`).

    The RMSprop warm-up settings are None for momentum SGD, the poly
    settings None for other schedules, the loss scaling None in float32.
    ``lr`` None is the linear-scaling rule, ``0.1 x total minibatch / 256``,
    or with LARS ``2 x sqrt(total minibatch / 256)``. With ``lars`` the exempt
    parameters are exempt from LARS too.
    """

    name: str
    epochs: int
    optimizer: str
    momentum_correction: bool
    lr_schedule: str
    lr: typing.Optional[float]
    momentum: float
    weight_decay: float
    weight_decay_exempt: str
    zero_init_residual: bool
    scale_schedule: bool
    lars: bool
    lars_eta: float
    label_smoothing: float
    dtype: str
    lr_rmsprop: typing.Optional[float] = None
    mu2: typing.Optional[float] = None
    eps: typing.Optional[float] = None
    warmup_center: typing.Optional[float] = None
    warmup_period: typing.Optional[float] = None
    alpha_sgd_form: typing.Optional[str] = None
    warmup_epochs: typing.Optional[float] = None
    poly_power: typing.Optional[float] = None
    loss_scale: typing.Optional[float] = None
    loss_scale_interval: typing.Optional[int] = None

    @property
    def schedule_epochs(self):
        """The run length the epoch boundaries are laid out for."""
        return self.epochs if self.scale_schedule else \
            schedules.REFERENCE_EPOCHS


# The settings a caller may override, in the order of Recipe's fields.
OVERRIDES = tuple(f.name for f in dataclasses.fields(Recipe)
                  if f.name not in ('name', 'epochs'))


def resolve(name='akiba2017', epochs=schedules.REFERENCE_EPOCHS,
            **overrides):
    """The recipe ``name`` for a run of ``epochs``, with ``overrides``.

    An override of None keeps the recipe's value. Raises
    :class:`largebatch.errors.ParameterError` naming the setting and its
    value.
    """
    if name not in RECIPES:
        raise ParameterError('recipe', name,
                             'one of ' + ', '.join(sorted(RECIPES)))
    unknown = set(overrides) - set(OVERRIDES)
    if unknown:
        raise TypeError('unknown recipe settings: ' + ', '.join(unknown))
    given = {k: v for k, v in overrides.items() if v is not None}
    values = dict(COMMON_DEFAULTS, **RECIPES[name])
    warmup = given.get('optimizer', values['optimizer']) == 'rmsprop-warmup'
    if warmup:
        if given.get('momentum_correction') is False:
            raise ParameterError('momentum_correction', False,
                                 'on with the rmsprop-warmup optimizer')
        values['momentum_correction'] = True
    _only_with(warmup, RMSPROP_WARMUP_DEFAULTS, given, values,
               'the optimizer is rmsprop-warmup')
    lr_schedule = given.get('lr_schedule', values['lr_schedule'])
    _only_with(lr_schedule == 'poly', POLY_DEFAULTS, given, values,
               'the lr schedule is poly')
    _only_with(given.get('dtype') == 'mixed16', MIXED16_DEFAULTS, given,
               values, 'the dtype is mixed16')
    values.update(given)
    recipe = Recipe(name=name, epochs=epochs, **values)
    _check(recipe)
    return recipe


def _only_with(applies, defaults, given, values, condition):
    """Fill ``defaults`` into ``values`` where they apply; refuse them in
    ``given`` where they do not."""
    if applies:
        values.update(defaults)
        return
    for setting in defaults:
        if setting in given:
            raise ParameterError(setting, given[setting],
                                 'unset unless ' + condition)


def _check(recipe):
    checks = [('epochs', lambda v: v > 0, 'positive'),
              ('optimizer', lambda v: v in OPTIMIZERS,
               'one of ' + ', '.join(OPTIMIZERS)),
              ('lr_schedule', lambda v: v in LR_SCHEDULES,
               'one of ' + ', '.join(sorted(LR_SCHEDULES))),
              ('weight_decay_exempt', lambda v: v in WEIGHT_DECAY_EXEMPT,
               'one of ' + ', '.join(sorted(WEIGHT_DECAY_EXEMPT))),
              ('lr', lambda v: v is None or v > 0, 'positive'),
              ('momentum', lambda v: 0 <= v < 1, 'in [0, 1)'),
              ('weight_decay', lambda v: v >= 0, 'non-negative'),
              ('lars_eta', lambda v: v > 0, 'positive'),
              ('label_smoothing', lambda v: 0 <= v < 1, 'in [0, 1)'),
              ('dtype', lambda v: v in DTYPES, 'one of ' + ', '.join(DTYPES))]
    if recipe.optimizer == 'rmsprop-warmup':
        checks += [('lr_rmsprop', lambda v: v >= 0, 'non-negative'),
                   ('mu2', lambda v: 0 <= v < 1, 'in [0, 1)'),
                   ('eps', lambda v: v >= 0, 'non-negative'),
                   ('warmup_period', lambda v: v > 0, 'positive'),
                   ('alpha_sgd_form',
                    lambda v: v in schedules.ALPHA_SGD_SLOPES,
                    'one of ' + ', '.join(sorted(schedules.ALPHA_SGD_SLOPES)))]
    if recipe.dtype == 'mixed16':
        checks += [('loss_scale',
                    lambda v: v >= 1 and math.log2(v).is_integer(),
                    'a power of two >= 1'),
                   ('loss_scale_interval', lambda v: v >= 1, 'positive')]
    if recipe.lr_schedule == 'poly':
        checks += [('warmup_epochs',
                    lambda v: 0 <= v < schedules.REFERENCE_EPOCHS,
                    'in [0, 90), epochs of the 90-epoch layout'),
                   ('poly_power', lambda v: v > 0, 'positive')]
    for name, ok, expected in checks:
        if not ok(getattr(recipe, name)):
            raise ParameterError(name, getattr(recipe, name), expected)


def _alpha_rmsprop(epoch, lr, alpha_sgd, lr_rmsprop):
    return schedules.alpha_rmsprop(alpha_sgd(epoch), lr(epoch), lr_rmsprop)


def hyperparameter_schedules(recipe, total_batchsize):
    """``{hyperparameter: function of the fractional epoch}`` of the recipe.

    ``lr`` always; ``alpha_sgd`` and ``alpha_rmsprop`` with RMSprop warm-up.
    These functions are the only place where the values are set.
    """
    epochs = recipe.schedule_epochs
    base_lr = recipe.lr
    if base_lr is None and recipe.lars:
        base_lr = schedules.square_root_scaling_lr(total_batchsize)
    lr = functools.partial(LR_SCHEDULES[recipe.lr_schedule],
                           total_batchsize=total_batchsize, epochs=epochs,
                           base_lr=base_lr)
    if recipe.lr_schedule == 'poly':
        lr = functools.partial(lr, warmup_epochs=recipe.warmup_epochs,
                               power=recipe.poly_power)
    result = {'lr': lr}
    if recipe.optimizer == 'rmsprop-warmup':
        scale = epochs / schedules.REFERENCE_EPOCHS
        alpha_sgd = functools.partial(
            schedules.alpha_sgd, center=recipe.warmup_center * scale,
            period=recipe.warmup_period * scale, form=recipe.alpha_sgd_form)
        result['alpha_sgd'] = alpha_sgd
        result['alpha_rmsprop'] = functools.partial(
            _alpha_rmsprop, lr=lr, alpha_sgd=alpha_sgd,
            lr_rmsprop=recipe.lr_rmsprop)
    return result


def create_optimizer(recipe, cpu_kernels=None):
    """The recipe's optimizer, not set up.

    RMSprop warm-up, or momentum SGD: with momentum correction Chainer's
    ``CorrectedMomentumSGD``, without it Chainer's ``MomentumSGD``. The
    scheduled values (:func:`hyperparameter_schedules`) are set by
    :func:`extensions.add_schedules`.
    ``cpu_kernels``, a module with ``rmsprop_warmup`` and
    ``corrected_momentum_sgd`` (:mod:`cpu_engine.updates`), gives the
    updates on NumPy arrays; None: NumPy's and Chainer's own.
    """
    def kernel(name):
        return getattr(cpu_kernels, name) if cpu_kernels else None
    if recipe.optimizer == 'rmsprop-warmup':
        return RMSpropWarmup(mu1=recipe.momentum, mu2=recipe.mu2,
                             eps=recipe.eps,
                             cpu_kernel=kernel('rmsprop_warmup'))
    if recipe.momentum_correction:
        return CorrectedMomentumSGD(
            momentum=recipe.momentum,
            cpu_kernel=kernel('corrected_momentum_sgd'))
    return chainer.optimizers.MomentumSGD(momentum=recipe.momentum)


def add_hooks(optimizer, recipe, cpu_kernels=None):
    """Adds the LARS or weight-decay hook and, with mixed16, float32 master
    weights for the update; call it after ``optimizer.setup``.
    ``cpu_kernels`` (with ``weight_decay``) as in :func:`create_optimizer`.

    The hook goes on every parameter's update rule, not on the optimizer:
    Chainer calls a rule's hooks on what the rule updates (the float32
    master under mixed16) after dividing the loss scale out, and an
    optimizer's on the float16 parameter with the scaled gradient.
    """
    if recipe.dtype == 'mixed16':
        optimizer.use_fp32_update()
    exempt = WEIGHT_DECAY_EXEMPT[recipe.weight_decay_exempt]
    if recipe.lars:
        hook = LARS(recipe.lars_eta, recipe.weight_decay, exempt=exempt)
    elif recipe.weight_decay > 0:
        hook = WeightDecay(
            recipe.weight_decay, exempt=exempt,
            cpu_kernel=cpu_kernels.weight_decay if cpu_kernels else None)
    else:
        return
    for param in optimizer.target.params():
        param.update_rule.add_hook(hook)


def create_multi_node_optimizer(recipe, model, comm, cpu_kernels=None,
                                mean_checked=False):
    """The recipe's optimizer of ``model`` over ChainerMN's ``comm``, set
    up, with the non-finite guard (which trusts a communicator that checks
    the mean itself: ``mean_checked``) and the recipe's hooks
    (:func:`add_hooks`)."""
    optimizer = chainermn.create_multi_node_optimizer(
        create_optimizer(recipe, cpu_kernels), comm)
    optimizer.setup(model)
    optimizer.add_hook(NonFiniteGradientGuard(mean_checked=mean_checked))
    add_hooks(optimizer, recipe, cpu_kernels)
    return optimizer


def create_loss_scale(recipe):
    """The dynamic loss scale of a mixed16 recipe, else None."""
    if recipe.dtype != 'mixed16':
        return None
    return DynamicLossScale(recipe.loss_scale, recipe.loss_scale_interval)

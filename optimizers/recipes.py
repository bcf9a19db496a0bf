"""Command-line optimization recipes: the one place flags become an optimizer.

``--recipe`` picks a whole recipe; every part can also be set on its own and
an explicit flag always wins over the recipe (flags default to None and are
filled in by :func:`resolve`):

- ``akiba2017``: RMSprop warm-up and the slow-start learning rate.
- ``goyal2017``: momentum SGD with momentum correction, 5-epoch gradual
  warm-up, x0.1 at 30/60/80 epochs, no decay of normalization gamma/beta,
  zero-init of the last BN gamma of every residual block.
- ``sgd``: Chainer's momentum SGD at the linear-scaling learning rate.

Use from a training script::

    recipes.add_arguments(parser)           # then, after parsing:
    recipes.resolve(args, parser)           # needs args.epoch
    model = ResNet50(zero_init_residual=recipes.zero_init_residual(args))
    optimizer = chainermn.create_multi_node_optimizer(
        recipes.create_optimizer(args, total_batchsize), comm)
    optimizer.setup(model)
    recipes.add_hooks(optimizer, args)      # hooks need a set-up optimizer
    recipes.extend_trainer(trainer, args, optimizer, total_batchsize)
"""
import functools

import chainer

from extensions import schedules
from extensions.hyperparameter_schedule import HyperparameterSchedule
from optimizers.rmsprop_warmup import RMSpropWarmup
from optimizers.weight_decay import BIAS_PARAMS
from optimizers.weight_decay import NORMALIZATION_PARAMS
from optimizers.weight_decay import WeightDecay

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
}
# Defaults shared by every recipe.
COMMON_DEFAULTS = dict(momentum=0.9, weight_decay=1e-4, scale_schedule=False)
# Settings of the RMSprop warm-up optimizer only, and their defaults.
RMSPROP_WARMUP_DEFAULTS = dict(lr_rmsprop=3e-4, mu2=0.99, eps=1e-8,
                               warmup_center=10.0, warmup_period=5.0,
                               alpha_sgd_form='elu')
LR_SCHEDULES = {
    'slow-start': schedules.slow_start_lr,
    'goyal': schedules.goyal_lr,
    'constant': schedules.constant_lr,
}
WEIGHT_DECAY_EXEMPT = {
    'none': (),
    'bn': NORMALIZATION_PARAMS,
    'bn-bias': NORMALIZATION_PARAMS + BIAS_PARAMS,
}


def _flag(dest):
    return '--' + dest.replace('_', '-')


def _add_switch(group, dest, help_text):
    """``--name`` / ``--no-name`` setting ``dest`` to True / False."""
    group.add_argument(_flag(dest), dest=dest, action='store_true',
                       default=None, help=help_text)
    group.add_argument('--no-' + _flag(dest)[2:], dest=dest,
                       action='store_false', default=None,
                       help='turn {} off'.format(_flag(dest)))


def add_arguments(parser):
    """Adds the recipe's flags to an ``argparse`` parser."""
    group = parser.add_argument_group(
        'optimization recipe',
        'a recipe sets the defaults; each flag below overrides its part')
    group.add_argument('--recipe', choices=sorted(RECIPES),
                       default='akiba2017',
                       help='whole recipe (default: akiba2017)')
    group.add_argument('--optimizer', choices=('rmsprop-warmup',
                                               'momentum-sgd'),
                       help='update rule (akiba2017: rmsprop-warmup; '
                            'goyal2017, sgd: momentum-sgd)')
    _add_switch(group, 'momentum_correction',
                'momentum-sgd with lr outside the momentum '
                'buffer, so lr changes act at once (akiba2017, '
                'goyal2017: on; sgd: off = Chainer\'s '
                'MomentumSGD); rmsprop-warmup always has it')
    group.add_argument('--lr-schedule', choices=sorted(LR_SCHEDULES),
                       help='learning-rate schedule (akiba2017: slow-start; '
                            'goyal2017: goyal; sgd: constant)')
    group.add_argument('--lr', type=float,
                       help='base learning rate the schedule multiplies '
                            '(default: 0.1 x total minibatch / 256)')
    group.add_argument('--momentum', type=float,
                       help='momentum mu1 (default: 0.9)')
    group.add_argument('--lr-rmsprop', type=float,
                       help='RMSprop step eta_RMSprop of the warm-up; '
                            'alpha_rmsprop = (1 - alpha_sgd) x lr-rmsprop / '
                            'lr (default: 3e-4)')
    group.add_argument('--mu2', type=float,
                       help='decay of the mean square of the gradient '
                            '(default: 0.99)')
    group.add_argument('--eps', type=float,
                       help='RMSprop denominator sqrt(m) + eps '
                            '(default: 1e-8)')
    group.add_argument('--warmup-center', type=float,
                       help='epoch at which alpha_sgd = 0.5 (default: 10)')
    group.add_argument('--warmup-period', type=float,
                       help='epochs over which alpha_sgd slides '
                            '(default: 5)')
    group.add_argument('--alpha-sgd-form',
                       choices=sorted(schedules.ALPHA_SGD_SLOPES),
                       help='linear branch of alpha_sgd: elu = 0.5 + '
                            '(e - c) / p, double-slope = 0.5 + 2 (e - c) / p '
                            '(default: elu)')
    _add_switch(group, 'scale_schedule',
                'lay all epoch boundaries (and the warm-up '
                'centre and period) out for --epoch instead of '
                '90 epochs (default: off)')
    group.add_argument('--weight-decay', type=float,
                       help='L2 weight decay, 0 for none (default: 1e-4)')
    group.add_argument('--weight-decay-exempt',
                       choices=sorted(WEIGHT_DECAY_EXEMPT),
                       help='parameters not decayed: bn = normalization '
                            'gamma/beta, bn-bias = those and biases '
                            '(goyal2017: bn; others: none)')
    _add_switch(group, 'zero_init_residual',
                'start the last BN gamma of every residual '
                'block at 0 (goyal2017: on; others: off)')
    return group


def resolve(args, parser=None):
    """Fills the flags left at None from the recipe and checks them.

    Idempotent. Bad values raise ``ValueError`` naming the flag, or go to
    ``parser.error`` when a parser is given. Needs ``args.epoch``.
    """
    try:
        _resolve(args)
    except ValueError as e:
        if parser is None:
            raise
        parser.error(str(e))
    return args


def _resolve(args):
    recipe = RECIPES[args.recipe]
    if args.optimizer is None:
        args.optimizer = recipe['optimizer']
    if args.optimizer == 'rmsprop-warmup':
        if args.momentum_correction is False:
            raise ValueError('--no-momentum-correction applies only to '
                             '--optimizer momentum-sgd')
        args.momentum_correction = True
        defaults = dict(RMSPROP_WARMUP_DEFAULTS)
    else:
        for dest in RMSPROP_WARMUP_DEFAULTS:
            if getattr(args, dest) is not None:
                raise ValueError('{} applies only to --optimizer '
                                 'rmsprop-warmup'.format(_flag(dest)))
        defaults = {}
    defaults.update(recipe)
    defaults.update(COMMON_DEFAULTS)
    for dest, value in defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)
    _check(args)


def _check(args):
    checks = [('lr', lambda v: v is None or v > 0, 'positive'),
              ('momentum', lambda v: 0 <= v < 1, 'in [0, 1)'),
              ('weight_decay', lambda v: v >= 0, 'non-negative')]
    if args.optimizer == 'rmsprop-warmup':
        checks += [('lr_rmsprop', lambda v: v >= 0, 'non-negative'),
                   ('mu2', lambda v: 0 <= v < 1, 'in [0, 1)'),
                   ('eps', lambda v: v >= 0, 'non-negative'),
                   ('warmup_period', lambda v: v > 0, 'positive')]
    for dest, ok, expected in checks:
        if not ok(getattr(args, dest)):
            raise ValueError('{} must be {}, got {}'.format(
                _flag(dest), expected, getattr(args, dest)))


def _schedule_epochs(args):
    """The run length the epoch boundaries are laid out for."""
    if args.scale_schedule:
        return args.epoch
    return schedules.REFERENCE_EPOCHS


def _alpha_rmsprop_schedule(epoch, lr_schedule, alpha_sgd_schedule,
                            lr_rmsprop):
    return schedules.alpha_rmsprop(alpha_sgd_schedule(epoch),
                                   lr_schedule(epoch), lr_rmsprop)


def hyperparameter_schedules(args, total_batchsize):
    """``{hyperparameter: function of the fractional epoch}`` of the recipe.

    ``lr`` always; ``alpha_sgd`` and ``alpha_rmsprop`` with RMSprop warm-up.
    """
    resolve(args)
    epochs = _schedule_epochs(args)
    lr = functools.partial(LR_SCHEDULES[args.lr_schedule],
                           total_batchsize=total_batchsize, epochs=epochs,
                           base_lr=args.lr)
    result = {'lr': lr}
    if args.optimizer == 'rmsprop-warmup':
        scale = epochs / schedules.REFERENCE_EPOCHS
        alpha_sgd = functools.partial(
            schedules.alpha_sgd, center=args.warmup_center * scale,
            period=args.warmup_period * scale, form=args.alpha_sgd_form)
        result['alpha_sgd'] = alpha_sgd
        result['alpha_rmsprop'] = functools.partial(
            _alpha_rmsprop_schedule, lr_schedule=lr,
            alpha_sgd_schedule=alpha_sgd, lr_rmsprop=args.lr_rmsprop)
    return result


def create_optimizer(args, total_batchsize):
    """The recipe's optimizer, not set up, with its epoch-0 hyperparameters.

    RMSprop warm-up, or momentum SGD: with momentum correction the RMSprop
    warm-up rule held at alpha_sgd = 1, alpha_rmsprop = 0; without it
    Chainer's ``MomentumSGD``.
    """
    resolve(args)
    if args.optimizer == 'rmsprop-warmup':
        optimizer = RMSpropWarmup(mu1=args.momentum, mu2=args.mu2,
                                  eps=args.eps)
    elif args.momentum_correction:
        optimizer = RMSpropWarmup(mu1=args.momentum)
    else:
        optimizer = chainer.optimizers.MomentumSGD(momentum=args.momentum)
    for attr, schedule in hyperparameter_schedules(
            args, total_batchsize).items():
        setattr(optimizer, attr, schedule(0.0))
    return optimizer


def add_hooks(optimizer, args):
    """Adds the weight-decay hook; call it after ``optimizer.setup``."""
    resolve(args)
    if args.weight_decay > 0:
        optimizer.add_hook(WeightDecay(
            args.weight_decay,
            exempt=WEIGHT_DECAY_EXEMPT[args.weight_decay_exempt]))


def extend_trainer(trainer, args, optimizer, total_batchsize):
    """Adds one :class:`HyperparameterSchedule` per scheduled value.

    They set ``lr`` (and the alphas) on ``optimizer`` every iteration from
    the updater's fractional epoch and report them under those keys; every
    worker needs them. Returns the reported keys.
    """
    scheduled = hyperparameter_schedules(args, total_batchsize)
    for attr, schedule in scheduled.items():
        trainer.extend(HyperparameterSchedule(attr, schedule, optimizer))
    return list(scheduled)


def zero_init_residual(args):
    """Whether the model starts the last BN gamma of each block at 0."""
    resolve(args)
    return args.zero_init_residual

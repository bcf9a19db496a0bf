"""Optimizers, optimizer hooks and the command-line optimization recipes."""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from optimizers.corrected_momentum_sgd import CorrectedMomentumSGD  # NOQA
from optimizers.non_finite_guard import NonFiniteGradientGuard  # NOQA
from optimizers.rmsprop_warmup import RMSpropWarmup  # NOQA
from optimizers.rmsprop_warmup import RMSpropWarmupRule  # NOQA
from optimizers.lars import LARS  # NOQA
from optimizers.weight_decay import WeightDecay  # NOQA

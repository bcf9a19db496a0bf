"""L2 weight decay that can leave chosen kinds of parameters undecayed.

Goyal et al. (2017) do not decay the normalization scale and shift (gamma
and beta); Chainer's ImageNet example decays every parameter. Parameters are
told apart by name, as Chainer's links name them: ``gamma`` and ``beta`` in
every normalization link, ``b`` for the bias of a linear or convolution link.

The hook is an update rule's (``UpdateRule.add_hook``, as
:func:`optimizers.recipes.add_hooks` registers it), so it sees what the rule
updates: under ``chainer.mixed16`` the float32 master copy and its gradient
with the loss scale already divided out. As an optimizer's hook it would act
on the float16 weights and the scaled float16 gradient, where ``g += rate *
scale * p`` can overflow after the all-reduce has checked the gradient.
"""
import numpy

import chainer
from chainer import optimizer_hooks

from largebatch import cuda_stack

NORMALIZATION_PARAMS = ('gamma', 'beta')
BIAS_PARAMS = ('b',)


#: ``cuda.elementwise`` arguments (through :func:`cuda_stack.elementwise`,
#: without FMA) of the decay on a GPU.
WEIGHT_DECAY_KERNEL = ('T p, T rate', 'T g', 'g += rate * p', 'weight_decay')


class WeightDecay(optimizer_hooks.WeightDecay):

    """Update-rule hook ``g += rate * theta`` for every parameter not
    exempt.

    Args:
        rate (float): coefficient of the decay.
        exempt (tuple of str): names of the parameters not to decay, e.g.
            ``NORMALIZATION_PARAMS + BIAS_PARAMS``.
        cpu_kernel (callable): ``cpu_kernel(g, theta, rate)`` adding
            ``rate * theta`` to ``g`` in place on NumPy arrays; None: NumPy.
    """

    def __init__(self, rate, exempt=(), cpu_kernel=None):
        super(WeightDecay, self).__init__(rate)
        self.exempt = tuple(exempt)
        self.cpu_kernel = cpu_kernel

    def __call__(self, rule, param):
        theta, g = param.array, param.grad
        if param.name in self.exempt or theta is None or g is None:
            return
        if type(g) is numpy.ndarray and type(theta) is numpy.ndarray:
            if self.cpu_kernel is None:
                g += self.rate * theta
            else:
                self.cpu_kernel(g, theta, self.rate)
            return
        with chainer.using_device(param.device):
            cuda_stack.elementwise(WEIGHT_DECAY_KERNEL)(
                theta, g.dtype.type(self.rate), g)

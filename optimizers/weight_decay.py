"""L2 weight decay that can leave chosen kinds of parameters undecayed.

Goyal et al. (2017) do not decay the normalization scale and shift (gamma
and beta); Chainer's ImageNet example decays every parameter. Parameters are
told apart by name, as Chainer's links name them: ``gamma`` and ``beta`` in
every normalization link, ``b`` for the bias of a linear or convolution link.
"""
import numpy

from chainer import optimizer_hooks

NORMALIZATION_PARAMS = ('gamma', 'beta')
BIAS_PARAMS = ('b',)


class WeightDecay(optimizer_hooks.WeightDecay):

    """Optimizer hook ``g += rate * theta`` for every parameter not exempt.

    Args:
        rate (float): coefficient of the decay.
        exempt (tuple of str): names of the parameters not to decay, e.g.
            ``NORMALIZATION_PARAMS + BIAS_PARAMS``.
        cpu_kernel (callable): ``cpu_kernel(g, theta, rate)`` adding
            ``rate * theta`` to ``g`` in place on NumPy arrays; None: Chainer's
            ``WeightDecay`` does it.
    """

    def __init__(self, rate, exempt=(), cpu_kernel=None):
        super(WeightDecay, self).__init__(rate)
        self.exempt = tuple(exempt)
        self.cpu_kernel = cpu_kernel

    def __call__(self, rule, param):
        if param.name in self.exempt:
            return
        theta, g = param.array, param.grad
        if (self.cpu_kernel is None or type(g) is not numpy.ndarray
                or type(theta) is not numpy.ndarray):
            super(WeightDecay, self).__call__(rule, param)
            return
        rate = self.rate
        if param._loss_scale is not None:
            rate *= param._loss_scale
        self.cpu_kernel(g, theta, rate)

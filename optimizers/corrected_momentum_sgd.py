"""Chainer's ``CorrectedMomentumSGD`` with a pluggable update on NumPy arrays.

Momentum SGD with Goyal et al.'s (2017) momentum correction, their
equation (9)::

    v_t     = mu * v_{t-1} - g_t
    theta_t = theta_{t-1} + lr * v_t

The learning rate multiplies the whole buffer, so a change of ``lr`` acts on
the next step at once. One buffer per parameter, as in Chainer's
``MomentumSGD``. On NumPy arrays the update is Chainer's, or the kernel
given as ``cpu_kernel`` (the trainer passes the CPU engine's on CPUs).
"""
from chainer import optimizers
from chainer.optimizers import corrected_momentum_sgd


class CorrectedMomentumSGDRule(
        corrected_momentum_sgd.CorrectedMomentumSGDRule):

    """Chainer's rule; ``cpu_kernel(theta, g, v, lr, momentum)``, if given,
    does the update in place on NumPy arrays."""

    def __init__(self, parent_hyperparam=None, lr=None, momentum=None,
                 cpu_kernel=None):
        super(CorrectedMomentumSGDRule, self).__init__(
            parent_hyperparam, lr, momentum)
        self.cpu_kernel = cpu_kernel

    def update_core_cpu(self, param):
        if self.cpu_kernel is None or param.grad is None:
            super(CorrectedMomentumSGDRule, self).update_core_cpu(param)
            return
        self.cpu_kernel(param.array, param.grad, self.state['v'],
                        self.hyperparam.lr, self.hyperparam.momentum)


class CorrectedMomentumSGD(optimizers.CorrectedMomentumSGD):

    """Chainer's ``CorrectedMomentumSGD``.

    Args:
        lr (float): learning rate.
        momentum (float): decay of the momentum buffer.
        cpu_kernel (callable): the update on NumPy arrays (see
            :class:`CorrectedMomentumSGDRule`); None: Chainer's.
    """

    def __init__(self, lr=corrected_momentum_sgd._default_hyperparam.lr,
                 momentum=corrected_momentum_sgd._default_hyperparam.momentum,
                 cpu_kernel=None):
        super(CorrectedMomentumSGD, self).__init__(lr, momentum)
        self.cpu_kernel = cpu_kernel

    def create_update_rule(self):
        return CorrectedMomentumSGDRule(self.hyperparam,
                                        cpu_kernel=self.cpu_kernel)

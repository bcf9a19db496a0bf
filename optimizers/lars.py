"""LARS: layer-wise adaptive rate scaling (You, Gitman & Ginsburg 2017).

Per parameter array ``w`` with gradient ``g``, the local learning rate is

    lambda = eta * ||w|| / (||g|| + beta * ||w|| + eps)

and momentum SGD runs on ``lambda * (g + beta * w)``:

    v = m * v - gamma * lambda * (g + beta * w),    w = w + v

(Chainer's ``MomentumSGD`` with ``lr = gamma``). Chainer's
``GradientLARS`` folds the trust coefficient ``eta`` into the learning rate;
here it is applied in the hook, so ``lr`` is the paper's global ``gamma``
and parameters exempt from LARS (normalization scale and shift, biases, as
in the MLPerf reference) take plain ``gamma * g`` steps with no decay.

Like :mod:`optimizers.weight_decay`, the hook is an update rule's: under
``chainer.mixed16`` it sees the float32 master copy and the gradient with
the loss scale divided out.
"""
import chainer
from chainer import optimizer_hooks


class LARS(optimizer_hooks.GradientLARS):

    """Update-rule hook ``g = lambda * (g + beta * w)`` for each array not
    exempt; ``lambda`` as in the module docstring, and 1 where ``||w||`` is
    not above ``threshold`` (e.g. zero-initialized arrays).

    Args:
        trust_coefficient (float): ``eta``.
        weight_decay (float): ``beta``.
        exempt (tuple of str): names of the parameters left alone, e.g.
            ``('gamma', 'beta', 'b')``.
        threshold (float): norm of ``w`` below which LARS is not applied.
        eps (float): added to the denominator.
    """

    name = 'LARS'

    def __init__(self, trust_coefficient=0.001, weight_decay=0.0, exempt=(),
                 threshold=1e-2, eps=1e-9):
        super(LARS, self).__init__(threshold, weight_decay, eps)
        self.trust_coefficient = trust_coefficient
        self.exempt = tuple(exempt)

    def trust_ratio(self, xp, p, g):
        """``lambda`` of the module docstring as a 0-d float64 array on
        ``p``'s device: nothing is read back to the host, so a GPU update
        does not wait for each of ResNet-50's 161 arrays."""
        # float32 norms: a float16 sum of squares overflows
        p_norm = xp.linalg.norm(p.astype(xp.float32, copy=False)).astype(
            xp.float64)
        g_norm = xp.linalg.norm(g.astype(xp.float32, copy=False)).astype(
            xp.float64)
        rate = self.trust_coefficient * p_norm / (
            g_norm + self.weight_decay * p_norm + self.eps)
        return xp.where(p_norm <= self.threshold, xp.float64(1.0), rate)

    def __call__(self, rule, param):
        p, g = param.array, param.grad
        if p is None or g is None or param.name in self.exempt:
            return
        with chainer.using_device(param.device):
            rate = self.trust_ratio(param.device.xp, p, g)
            if self.weight_decay:
                g += self.weight_decay * p
            g *= rate.astype(g.dtype)

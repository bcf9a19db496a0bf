"""RMSprop warm-up (Akiba, Suzuki & Fukuda, 2017): RMSprop sliding into SGD.

One momentum buffer ``delta`` takes a mix of the SGD and the RMSprop step::

    m_t     = mu2 * m_{t-1} + (1 - mu2) * g_t^2
    delta_t = mu1 * delta_{t-1}
              - (alpha_sgd + alpha_rmsprop / (sqrt(m_t) + eps)) * g_t
    theta_t = theta_{t-1} + lr * delta_t

``lr``, ``alpha_sgd`` and ``alpha_rmsprop`` are hyperparameters that a
schedule may change before every update. The learning rate multiplies the
whole buffer, so a change of ``lr`` acts on the next step at once (Goyal et
al.'s "momentum correction"). With ``alpha_sgd = 1`` and ``alpha_rmsprop = 0``
(the defaults) this is momentum SGD; at a constant ``lr`` it equals Chainer's
``MomentumSGD``, whose buffer ``v = momentum * v - lr * g`` is ``lr * delta``.

On NumPy arrays the update runs as NumPy expressions, or through the kernel
given as ``cpu_kernel`` (the trainer passes the CPU engine's on CPUs).
"""
import chainer
from chainer import optimizer
import numpy

from largebatch import cuda_stack

_default_hyperparam = optimizer.Hyperparameter()
_default_hyperparam.lr = 0.1
_default_hyperparam.mu1 = 0.9
_default_hyperparam.mu2 = 0.99
_default_hyperparam.eps = 1e-8
_default_hyperparam.alpha_sgd = 1.0
_default_hyperparam.alpha_rmsprop = 0.0


def _eps_in_dtype(hyperparam, dtype):
    """``eps`` cast to the parameter's dtype; it must not underflow to 0."""
    eps = dtype.type(hyperparam.eps)
    if hyperparam.eps != 0 and eps == 0:
        raise ValueError('eps of RMSpropWarmup ({}) is too small for {}'
                         .format(hyperparam.eps, dtype.name))
    return eps


#: ``cuda.elementwise`` arguments (through :func:`cuda_stack.elementwise`,
#: without FMA) of the update on a GPU: NumPy's operations
#: of :func:`rmsprop_warmup_numpy` in NumPy's order, ``1 - mu2`` rounded
#: from float64 as NumPy rounds it.
RMSPROP_WARMUP_KERNEL = (
    'T grad, T lr, T mu1, T mu2, T one_minus_mu2, T eps, T alpha_sgd, '
    'T alpha_rmsprop',
    'T param, T m, T delta',
    '''m = m * mu2 + grad * grad * one_minus_mu2;
       T step = alpha_rmsprop != 0
           ? (alpha_rmsprop / (sqrt(m) + eps) + alpha_sgd) * grad
           : grad * alpha_sgd;
       delta = delta * mu1 - step;
       param += delta * lr;''',
    'rmsprop_warmup')


def rmsprop_warmup_numpy(theta, g, m, delta, lr, mu1, mu2, eps,
                         alpha_sgd, alpha_rmsprop):
    """The update in place, in NumPy's float arithmetic."""
    m *= mu2
    m += g * g * (1 - mu2)
    if alpha_rmsprop:
        step = (alpha_rmsprop / (numpy.sqrt(m) + eps) + alpha_sgd) * g
    else:
        step = g * alpha_sgd
    delta *= mu1
    delta -= step
    theta += delta * lr


class RMSpropWarmupRule(optimizer.UpdateRule):

    """Update rule of :class:`RMSpropWarmup` for one parameter.

    Its state is the mean square ``m`` and the momentum buffer ``delta``.

    Args:
        parent_hyperparam (~chainer.optimizer.Hyperparameter): hyperparameter
            that provides the default values.
        lr (float): learning rate ``eta``.
        mu1 (float): decay of the momentum buffer.
        mu2 (float): decay of the mean square of the gradient.
        eps (float): added to ``sqrt(m)`` in the RMSprop denominator.
        alpha_sgd (float): weight of the SGD step.
        alpha_rmsprop (float): weight of the RMSprop step.
        cpu_kernel (callable): the update on NumPy arrays, in place, with
            the arguments of :func:`rmsprop_warmup_numpy` (its default).
    """

    is_elementwise = True

    def __init__(self, parent_hyperparam=None, lr=None, mu1=None, mu2=None,
                 eps=None, alpha_sgd=None, alpha_rmsprop=None,
                 cpu_kernel=None):
        super(RMSpropWarmupRule, self).__init__(
            parent_hyperparam or _default_hyperparam)
        self.cpu_kernel = cpu_kernel or rmsprop_warmup_numpy
        for name, value in (('lr', lr), ('mu1', mu1), ('mu2', mu2),
                            ('eps', eps), ('alpha_sgd', alpha_sgd),
                            ('alpha_rmsprop', alpha_rmsprop)):
            if value is not None:
                setattr(self.hyperparam, name, value)

    def init_state(self, param):
        with chainer.using_device(param.device):
            xp = param.device.xp
            self.state['m'] = xp.zeros_like(param.array)
            self.state['delta'] = xp.zeros_like(param.array)

    def update_core_cpu(self, param):
        grad = param.grad
        if grad is None:
            return
        hp = self.hyperparam
        self.cpu_kernel(
            param.array, grad, self.state['m'], self.state['delta'], hp.lr,
            hp.mu1, hp.mu2, _eps_in_dtype(hp, grad.dtype), hp.alpha_sgd,
            hp.alpha_rmsprop)

    def update_core_gpu(self, param):
        grad = param.grad
        if grad is None:
            return
        hp = self.hyperparam
        t = grad.dtype.type
        cuda_stack.elementwise(RMSPROP_WARMUP_KERNEL)(
            grad, t(hp.lr), t(hp.mu1), t(hp.mu2), t(1 - hp.mu2),
            _eps_in_dtype(hp, grad.dtype), t(hp.alpha_sgd),
            t(hp.alpha_rmsprop), param.array, self.state['m'],
            self.state['delta'])


class RMSpropWarmup(optimizer.GradientMethod):

    """RMSprop warm-up optimizer of Akiba et al. (2017).

    See the module docstring for the update. Extensions drive the warm-up by
    setting ``optimizer.lr``, ``optimizer.alpha_sgd`` and
    ``optimizer.alpha_rmsprop`` before each update.

    Args:
        lr (float): learning rate ``eta``.
        mu1 (float): decay of the momentum buffer.
        mu2 (float): decay of the mean square of the gradient.
        eps (float): added to ``sqrt(m)`` in the RMSprop denominator.
        alpha_sgd (float): weight of the SGD step.
        alpha_rmsprop (float): weight of the RMSprop step.
        cpu_kernel (callable): the update on NumPy arrays (see
            :class:`RMSpropWarmupRule`); None: NumPy expressions.
    """

    def __init__(self, lr=_default_hyperparam.lr,
                 mu1=_default_hyperparam.mu1, mu2=_default_hyperparam.mu2,
                 eps=_default_hyperparam.eps,
                 alpha_sgd=_default_hyperparam.alpha_sgd,
                 alpha_rmsprop=_default_hyperparam.alpha_rmsprop,
                 cpu_kernel=None):
        super(RMSpropWarmup, self).__init__()
        self.cpu_kernel = cpu_kernel
        self.hyperparam.lr = lr
        self.hyperparam.mu1 = mu1
        self.hyperparam.mu2 = mu2
        self.hyperparam.eps = eps
        self.hyperparam.alpha_sgd = alpha_sgd
        self.hyperparam.alpha_rmsprop = alpha_rmsprop

    lr = optimizer.HyperparameterProxy('lr')
    mu1 = optimizer.HyperparameterProxy('mu1')
    mu2 = optimizer.HyperparameterProxy('mu2')
    eps = optimizer.HyperparameterProxy('eps')
    alpha_sgd = optimizer.HyperparameterProxy('alpha_sgd')
    alpha_rmsprop = optimizer.HyperparameterProxy('alpha_rmsprop')

    def create_update_rule(self):
        return RMSpropWarmupRule(self.hyperparam, cpu_kernel=self.cpu_kernel)

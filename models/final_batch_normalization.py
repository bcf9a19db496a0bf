"""Batch normalization that keeps the last minibatch's statistics.

Akiba et al. (2017) evaluate without moving averages: each worker keeps the
statistics of its last training minibatch, and the kept statistics are
averaged over all workers by an all-reduce just before validation (and
before a snapshot is written).

Per channel, for the minibatches ``i = 1..K`` of the current window (``K``
micro-batches per update, see ``micro_batches``) with mean ``mu_i`` and
(biased) variance ``var_i``, the link keeps

    batch_mean    = mean_i(mu_i)
    batch_var     = mean_i(var_i)
    batch_mean_sq = mean_i(mu_i ** 2)

and averaging these three over the workers keeps them of the same form over
all ``K x workers`` minibatches. Under ``chainer.mixed16`` the parameters
and the kept statistics are float32, as in ``L.BatchNormalization``, while
the activations are float16. Test mode normalizes with one of two
readings of the averaged variance:

    'mean'  : var = batch_var                       (mean of the variances)
    'union' : var = batch_var + batch_mean_sq - batch_mean ** 2
              (the variance of the union of the minibatches, which adds the
              spread of their means)
"""
import numpy

import chainer
from chainer import configuration
import chainer.functions as F
from chainer import initializers
from chainer import variable

from largebatch import cuda_stack
from models import chainer_layers


VARIANCES = ('mean', 'union')

#: ``cuda.elementwise`` arguments (through :func:`cuda_stack.elementwise`,
#: without FMA) of :meth:`FinalBatchNormalization._keep`
#: on a GPU: the variance's correction and the fold of the three kept
#: arrays in one kernel per layer, with NumPy's float32 operations in
#: NumPy's order.
KEEP_KERNEL = (
    'T mean, T var, T correction, T count',
    'T kept_mean, T kept_var, T kept_sq',
    '''T v = var * correction;
       T sq = mean * mean;
       if (count == 1) {
           kept_mean = mean; kept_var = v; kept_sq = sq;
       } else {
           kept_mean += (mean - kept_mean) / count;
           kept_var += (v - kept_var) / count;
           kept_sq += (sq - kept_sq) / count;
       }''',
    'final_batch_statistics_keep')


class FinalBatchNormalization(chainer.Link):
    """Batch normalization whose test-mode statistics are the last batch's.

    A drop-in for :class:`chainer.links.BatchNormalization` as the ``norm``
    of :class:`models.ResNet50`.

    Args:
        size (int or tuple of ints): channel shape.
        eps (float): added to the variance before the square root.
        initial_gamma: initializer (or scalar) of the scale; 1 by default.
        initial_beta: initializer (or scalar) of the shift; 0 by default.
        variance (str): reading of the averaged variance in test mode,
            ``'mean'`` or ``'union'`` (see the module docstring).
        micro_batches (int): training-mode calls per window; the kept
            statistics average the calls of the latest window, so a worker
            that accumulates the gradients of K micro-batches per update
            keeps the statistics of all K.
        batch_normalization: the training-mode function, with the arguments
            of ``chainer.functions.batch_normalization``, and ``relu=True``
            for calls of the link with it (a layer set's:
            :func:`models.chainer_layers.batch_normalization` or
            ``cpu_engine.batch_normalization``).

    Called with ``relu=True``, the link returns ``relu`` of its output.
    """

    def __init__(self, size, eps=2e-5, initial_gamma=None, initial_beta=None,
                 variance='mean', micro_batches=1,
                 batch_normalization=chainer_layers.batch_normalization):
        super(FinalBatchNormalization, self).__init__()
        if variance not in VARIANCES:
            raise ValueError(
                'FinalBatchNormalization: variance must be one of {}, got {!r}'
                .format(', '.join(VARIANCES), variance))
        if not isinstance(micro_batches, int) or micro_batches < 1:
            raise ValueError(
                'FinalBatchNormalization: micro_batches must be a positive '
                'integer, got {!r}'.format(micro_batches))
        self.eps = eps
        self.variance = variance
        self.micro_batches = micro_batches
        self.batch_normalization = batch_normalization
        self.calls_in_window = 0
        dtype = chainer.get_dtype(map_mixed16=numpy.float32)
        with self.init_scope():
            self.gamma = variable.Parameter(
                _initializer(initial_gamma, 1, dtype), size)
            self.beta = variable.Parameter(
                _initializer(initial_beta, 0, dtype), size)
        self.add_persistent('batch_mean', numpy.zeros(size, dtype))
        self.add_persistent('batch_var', numpy.ones(size, dtype))
        self.add_persistent('batch_mean_sq', numpy.zeros(size, dtype))

    @property
    def kept_statistics(self):
        """The persistent arrays, in order, that
        :func:`extensions.final_batch_statistics.sync_final_batch_statistics`
        averages over the workers."""
        return self.batch_mean, self.batch_var, self.batch_mean_sq

    def statistics(self):
        """(mean, var) that test mode normalizes with."""
        if self.variance == 'union':
            return (self.batch_mean,
                    self.batch_var + self.batch_mean_sq - self.batch_mean ** 2)
        return self.batch_mean, self.batch_var

    def forward(self, x, relu=False):
        if not configuration.config.train:
            mean, var = self.statistics()
            y = F.fixed_batch_normalization(
                x, self.gamma, self.beta, mean, var, eps=self.eps)
            return F.relu(y) if relu else y
        # With decay 0 the running statistics of F.batch_normalization are
        # exactly this batch's mean and its unbiased variance.
        xp = self.xp
        with chainer.using_device(self.device):
            mean = xp.zeros_like(self.batch_mean)
            var = xp.zeros_like(self.batch_var)
        fused = {'relu': True} if relu else {}
        y = self.batch_normalization(
            x, self.gamma, self.beta, eps=self.eps, running_mean=mean,
            running_var=var, decay=0., **fused)
        if not configuration.config.in_recomputing:
            m = x.size // self.gamma.size
            self._keep(mean, var, max(m - 1., 1.) / m)
        return y

    def _keep(self, mean, var, correction):
        """Fold one batch into the running average of the current window;
        ``var * correction`` undoes the unbiased correction."""
        self.calls_in_window = self.calls_in_window % self.micro_batches + 1
        c = self.calls_in_window
        if self.xp is not numpy:
            dtype = mean.dtype.type
            cuda_stack.elementwise(KEEP_KERNEL)(
                mean, var, dtype(correction), dtype(c),
                *self.kept_statistics)
            return
        var *= correction
        for kept, new in zip(self.kept_statistics, (mean, var, mean * mean)):
            if c == 1:
                kept[...] = new
            else:
                kept += (new - kept) / c


def _initializer(initial, default, dtype):
    """The initializer of ``initial`` (``default`` if None) for ``dtype``."""
    initializer = initializers._get_initializer(
        default if initial is None else initial)
    initializer.dtype = dtype
    return initializer

"""One update from K micro-batches per worker ("virtual workers").

Each micro-batch is normalized by its own BN statistics and its gradient is
added to the others' with weight 1/K, so after the all-reduce the gradient is
the mean over all K x workers micro-batches: 2 processes with K = 512 and 32
images each train with the semantics of 1024 GPUs x 32 images.

Each micro-batch's parameter gradients are added in place into the sum of
the earlier ones (one array add per parameter), not through the ``F.add``
node Chainer's backward pass inserts when a gradient is already there; the
sums are the same floats, at a fraction of the per-parameter cost.

With a loss scale (mixed precision), every micro-batch's backward pass starts
from the scale, the all-reduce averages the scaled gradients, and the update
rules divide the scale out in float32 (Chainer's ``param._loss_scale``).
Under ``chainer.mixed16`` the K micro-batches' float16 gradients are summed
in float32 and divided by K once, after the sum, then stored in the
parameters' dtype: dividing each float16 gradient by K first (as the
float32 path does through ``loss / K``) would take log2 K bits off the loss
scale's headroom below, and K float16 sums would round K times.

With a float16 all-reduce, ``rounded_workers`` (p x K) rounds each
micro-batch's gradient as a float16 worker's is rounded (times a power-of-two
scale, to float16 and back: :func:`half_precision.scaling.round_as_worker`)
before it joins the sum, so that K micro-batches on p processes meet the
rounding of p x K workers, not of p.
"""
import numpy

import chainer
from chainer import reporter
from chainer import training

from largebatch.errors import NonFiniteGradientError
from half_precision import segmented
from half_precision.scaling import round_as_worker
from optimizers import fp32_masters


class MicroBatchUpdater(training.updaters.StandardUpdater):
    """``StandardUpdater`` over ``micro_batches`` micro-batches per update.

    Reported values (``main/loss``, ``main/accuracy``) are the means over the
    micro-batches. A :class:`~errors.NonFiniteGradientError` from the
    all-reduce or from :class:`~optimizers.NonFiniteGradientGuard` either
    stops training (``on_non_finite='stop'``, the error names the iteration)
    or skips that update (``'skip'``) and counts it in ``skipped_updates``.

    With ``loss_scale`` (:class:`~optimizers.loss_scaling.DynamicLossScale`)
    a non-finite gradient is first taken for an overflow of the scaled
    float16 gradients: the update is skipped, the scale halved and the skip
    counted in ``overflows``; only once the scale is at its minimum does the
    ``on_non_finite`` policy apply. ``loss_scale`` and ``overflows`` are
    reported, and saved in snapshots with the float32 master copies of
    float16 parameters (:mod:`optimizers.fp32_masters`).

    With ``rounded_workers`` (an int, p x K) and ``micro_batches`` > 1,
    every micro-batch's gradient is rounded as one of ``rounded_workers``
    float16 workers' before it is added to the others.

    ``progress``, if given, is called after each micro-batch's backward (the
    stall watchdog's mark: a worker waiting in the all-reduce is ahead of
    one still loading its images).
    """

    def __init__(self, iterator, optimizer, converter, device,
                 micro_batches=1, on_non_finite='stop', loss_scale=None,
                 rounded_workers=None, progress=None):
        super(MicroBatchUpdater, self).__init__(
            iterator, optimizer, converter=converter, device=device)
        if on_non_finite not in ('stop', 'skip'):
            raise ValueError('on_non_finite must be stop or skip')
        self.micro_batches = micro_batches
        self.on_non_finite = on_non_finite
        self.loss_scale = loss_scale
        self.rounded_workers = rounded_workers
        self.progress = progress
        self.skipped_updates = 0

    def update_core(self):
        iterator = self._iterators['main']
        optimizer = self._optimizers['main']
        model = optimizer.target
        model.cleargrads()
        k = self.micro_batches
        params = list(model.params()) if k > 1 else None
        in_float32 = params is not None and any(
            param.dtype == numpy.float16 for param in params)
        sums = _GradientSums(params, in_float32) if k > 1 else None
        summary = reporter.DictSummary()
        scale = None if self.loss_scale is None else self.loss_scale.scale
        for _ in range(k):
            batch = iterator.next()
            in_arrays = self.converter(batch, self.device)
            observation = {}
            with reporter.report_scope(observation):
                loss = model(*in_arrays)
            summary.add(observation)
            (loss if in_float32 else loss / k).backward(loss_scale=scale)
            del loss
            if sums is not None:
                if self.rounded_workers:
                    round_as_worker([param.grad for param in params],
                                    self.rounded_workers)
                sums.add_and_clear()
            if self.progress:
                self.progress()
        if sums is not None:
            sums.to_params(k)
        reporter.report(summary.compute_mean())
        try:
            optimizer.update()
        except NonFiniteGradientError as e:
            model.cleargrads()
            if self.loss_scale is None or not self.loss_scale.back_off():
                if self.on_non_finite == 'stop':
                    raise NonFiniteGradientError(
                        e.count, '{} at iteration {}'.format(
                            e.param_name, self.iteration + 1))
                self.skipped_updates += 1
        else:
            if self.loss_scale is not None:
                self.loss_scale.grow()
        reporter.report({'skipped_updates': self.skipped_updates})
        if self.loss_scale is not None:
            reporter.report({'loss_scale': scale,
                             'overflows': self.loss_scale.overflows})

    def serialize(self, serializer):
        for optimizer in self._optimizers.values():
            fp32_masters.initialize(optimizer)
        super(MicroBatchUpdater, self).serialize(serializer)
        self.skipped_updates = serializer('skipped_updates',
                                          self.skipped_updates)
        if self.loss_scale is not None:
            self.loss_scale.serialize(serializer['loss_scale'])
        for name, optimizer in self._optimizers.items():
            fp32_masters.serialize(optimizer,
                                   serializer['optimizer:' + name])


class _GradientSums(object):
    """The running sums of the micro-batches' gradients of ``params``.

    In float32 (``in_float32``, under mixed16): float32 arrays of one
    zeroed buffer, divided by K into the parameters' dtype at the end.
    Otherwise the first micro-batch's gradient arrays, into which the later
    ones are added (their 1/K is already in the loss). On a GPU each step is
    one kernel over all parameters (:mod:`half_precision.segmented`).
    """

    def __init__(self, params, in_float32):
        self.params = params
        self.in_float32 = in_float32
        self.sums = [None] * len(params)
        self.summed = [False] * len(params)
        if in_float32:
            shaped = [p for p in params if p.array is not None]
            xp = chainer.backend.get_array_module(shaped[0].array)
            offsets = segmented.offsets([p.array for p in shaped])
            buffer = xp.zeros(int(offsets[-1]), numpy.float32)
            slots = iter(zip(offsets[:-1], offsets[1:]))
            for i, param in enumerate(params):
                if param.array is not None:
                    start, end = next(slots)
                    self.sums[i] = buffer[start:end].reshape(param.shape)

    def add_and_clear(self):
        """Add each parameter's gradient into its sum, and clear it, so
        that the next backward pass writes a fresh gradient."""
        pairs = []
        for i, param in enumerate(self.params):
            if param.grad is None:
                continue
            if self.sums[i] is None:  # the first gradient starts the sum
                self.sums[i] = param.grad
            else:
                pairs.append((param.grad, self.sums[i]))
            self.summed[i] = True
        if pairs and chainer.backend.get_array_module(
                pairs[0][0]) is not numpy:
            segmented.accumulate([g for g, _ in pairs], [s for _, s in pairs])
        else:
            for grad, total in pairs:
                total += grad
        for param in self.params:
            param.cleargrad()

    def to_params(self, k):
        """Set each summed parameter's gradient: the sum, or in float32 the
        sum / ``k`` in the parameter's dtype."""
        summed = [(param, total) for param, total, used in zip(
            self.params, self.sums, self.summed) if used]
        if not self.in_float32:
            for param, total in summed:
                param.grad = total
            return
        xp = chainer.backend.get_array_module(summed[0][1]) if summed \
            else numpy
        if xp is numpy:
            for param, total in summed:
                param.grad = (total / k).astype(param.dtype, copy=False)
            return
        grads = [xp.empty(param.shape, param.dtype) for param, _ in summed]
        segmented.divide([total for _, total in summed], grads, k)
        for (param, _), grad in zip(summed, grads):
            param.grad = grad

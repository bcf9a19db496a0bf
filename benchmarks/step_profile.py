"""Where a training step on the CPU engine spends its time, by kind of work.

:class:`StepProfile` is a function hook that, while active, also times
the oneDNN primitives, the GEMM paths' convolution kernels and the
optimizer's update. Each timed region counts its own time, less that of the
regions inside it (the reorders of a convolution), so no time is counted
twice; what no region holds (Chainer's graph, the loss and the fully
connected layer, Python) is ``other``.
"""
import collections
import contextlib
import functools
import importlib
import time
from unittest import mock

import chainer
from chainer.functions.normalization import batch_normalization as _bn

from cpu_engine.batch_normalization import BatchNormalizationReLU
from cpu_engine.fork import Fork
from cpu_engine.max_pooling_2d import MaxPooling2D
from cpu_engine.max_pooling_2d import MaxPooling2DGrad
from cpu_engine import onednn
from cpu_engine.relu import ReLU
from cpu_engine.relu import ReLUGrad

# The module: the package's function of the same name hides it.
convolution_2d = importlib.import_module('cpu_engine.convolution_2d')

KINDS = ('conv forward', 'conv backward-data', 'conv backward-weights',
         'conv set-up', 'reorder', 'batch norm', 'relu', 'pooling',
         'fork', 'update', 'other')

# The convolution nodes' time outside the kernels and reorders: their
# output arrays, oneDNN memory objects, layout copies on the GEMM paths.
_NODE_KINDS = {
    convolution_2d.Convolution2DFunction: 'conv set-up',
    convolution_2d.Convolution2DGrad: 'conv set-up',
    _bn.BatchNormalization: 'batch norm',
    _bn.BatchNormalizationGrad: 'batch norm',
    BatchNormalizationReLU: 'batch norm',  # with the ReLU after it
    ReLU: 'relu',
    ReLUGrad: 'relu',
    MaxPooling2D: 'pooling',
    MaxPooling2DGrad: 'pooling',
    Fork: 'fork',  # the gradient sums of the blocks' inputs
}

_PROPAGATION_KINDS = {'forward': 'conv forward',
                      'backward_data': 'conv backward-data',
                      'backward_weights': 'conv backward-weights'}


class StepProfile(chainer.FunctionHook):
    """Seconds per kind of work (:data:`KINDS`) of the steps run inside it.

    ``optimizer``'s hooks and update rules are timed as ``update``. Use it
    as ``with StepProfile(optimizer) as profile: step()``, then
    :meth:`per_step`.
    """

    name = 'StepProfile'

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.seconds = collections.defaultdict(float)
        self.wall = 0.0
        self._open = []  # [kind, start, seconds of the regions inside]
        self._primitive_kinds = {}
        self._patches = None

    def _enter(self, kind):
        self._open.append([kind, time.perf_counter(), 0.0])

    def _exit(self):
        kind, start, inner = self._open.pop()
        elapsed = time.perf_counter() - start
        self.seconds[kind] += elapsed - inner
        if self._open:
            self._open[-1][2] += elapsed

    def _timed(self, kind, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            self._enter(kind(*args) if callable(kind) else kind)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit()
        return run

    def forward_preprocess(self, function, in_data):
        kind = _NODE_KINDS.get(type(function))
        if kind is not None:
            self._enter(kind)

    def forward_postprocess(self, function, in_data):
        if type(function) in _NODE_KINDS:
            self._exit()

    # A node's backward pass: its kernels where it runs them itself (the
    # fused batch normalization, fork), else the gradient nodes it applies,
    # which are regions of their own inside it.
    def backward_preprocess(self, function, in_data, out_grad):
        self.forward_preprocess(function, in_data)

    def backward_postprocess(self, function, in_data, out_grad):
        self.forward_postprocess(function, in_data)

    def _execute_kind(self, primitive, args, what):
        """A oneDNN primitive's kind: reorder, or its propagation."""
        if what == 'reorder':
            return 'reorder'
        if primitive.value not in self._primitive_kinds:
            for key, convolution in onednn._primitives.items():
                self._primitive_kinds[convolution.primitive.value] = (
                    _PROPAGATION_KINDS[key[0]])
        return self._primitive_kinds[primitive.value]

    def _convolve_kind(self, *args):
        """The NumPy path's ``_convolve`` computes ``gx`` inside ``_grad_x``
        and ``y`` otherwise."""
        inside = self._open and self._open[-1][0] == 'conv backward-data'
        return 'conv backward-data' if inside else 'conv forward'

    def __enter__(self):
        self._patches = contextlib.ExitStack()
        patch = functools.partial(self._patch, self._patches)
        patch(onednn, '_execute', self._execute_kind)
        patch(convolution_2d, '_convolve', self._convolve_kind)
        patch(convolution_2d, '_correlate', 'conv backward-weights')
        patch(convolution_2d, '_rows_convolve', 'conv forward')
        patch(convolution_2d, '_rows_grad_x', 'conv backward-data')
        patch(convolution_2d, '_rows_correlate', 'conv backward-weights')
        patch(convolution_2d.Convolution2DGrad, '_grad_x',
              'conv backward-data')
        patch(self.optimizer, 'call_hooks', 'update')
        for param in self.optimizer.target.params():
            patch(param.update_rule, 'update', 'update')
        self._start = time.perf_counter()
        return super(StepProfile, self).__enter__()

    def _patch(self, stack, owner, name, kind):
        stack.enter_context(mock.patch.object(
            owner, name, self._timed(kind, getattr(owner, name))))

    def __exit__(self, *exc_info):
        self.wall += time.perf_counter() - self._start
        self._patches.close()
        return super(StepProfile, self).__exit__(*exc_info)

    def per_step(self, steps):
        """``{kind: seconds}`` per step over ``steps`` steps, ``other``
        being the wall time that no region holds."""
        seconds = {kind: self.seconds[kind] / steps for kind in KINDS[:-1]}
        seconds['other'] = self.wall / steps - sum(seconds.values())
        return seconds

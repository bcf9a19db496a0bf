"""pytest plugin: Chainer's function and link tests call the CPU engine's.

For the session ``chainer.functions.<name>`` is the engine's function of
that name (:data:`ENGINE`), and ``chainer.links.Convolution2D`` and
``BatchNormalization`` are the engine's links (:data:`LINKS`); Chainer's
tests call them through ``chainer.functions`` and ``chainer.links``. A
test's ``forward_expected`` runs with Chainer's own (its convolution tests
compute the expected output with ``F.convolution_2d`` or the link itself),
and so does whatever Chainer's link code calls where the engine's link
hands a call to it. Cases that cannot reach the engine are deselected with
their reason (:data:`DESELECT`), and the summary says, per function and
link, how many tests ran the engine's own nodes and how many went through
its delegation to Chainer (options and dtypes it does not take).

Chainer's arrays are small, so by default the engine convolves them with
its NumPy GEMMs. ``--engine-paths onednn`` sends every float32 convolution
to oneDNN (channel-major activations); ``channels-last`` also hands each
4-D input to the engine as a channels-last copy, so that oneDNN, batch
normalization, ReLU and pooling run their channels-last code.
"""
import collections
import contextlib
import functools
import importlib

import chainer
import chainer.functions
import chainer.links
import numpy
import pytest

import cpu_engine

# The package's ``convolution_2d`` is the function; this is its module.
convolution_module = importlib.import_module('cpu_engine.convolution_2d')

NAMES = ('convolution_2d', 'batch_normalization', 'relu', 'max_pooling_2d')
ENGINE = {name: getattr(cpu_engine, name) for name in NAMES}
CHAINER = {name: getattr(chainer.functions, name) for name in NAMES}
LINK_NAMES = ('Convolution2D', 'BatchNormalization')
CHAINER_LINKS = {name: getattr(chainer.links, name) for name in LINK_NAMES}

#: ``(pytest mark or test class name, reason)``, the first match applies.
DESELECT = (
    ('chainerx', 'ChainerX arrays: the engine passes them to Chainer '
                 'unchanged'),
    ('gpu', 'CuPy arrays: the engine passes them to Chainer unchanged'),
    ('cudnn', 'cuDNN: the engine passes CuPy arrays to Chainer unchanged'),
    ('ideep', "use_ideep='always': iDeep has no wheels for current Pythons; "
              'where it is installed the engine steps aside '
              '(cpu_runtime.fast_paths_enabled)'),
    ('TestFixedBatchNormalization', 'fixed_batch_normalization: the engine '
                                    'has none (test-mode BN is Chainer\'s)'),
)

PATHS = ('default', 'onednn', 'channels-last')

_state = {'own': False, 'test': None, 'paths': 'default'}
_reached = collections.defaultdict(set)  # name -> {(test, 'engine'), ...}
_deselected = collections.Counter()


@contextlib.contextmanager
def chainers_own():
    """``chainer.functions`` as Chainer has them, for the block."""
    own, _state['own'] = _state['own'], True
    try:
        yield
    finally:
        _state['own'] = own


def _engine_node(y):
    """Whether the variable ``y`` comes from one of the engine's nodes."""
    creator = getattr(y, 'creator', None)
    node = getattr(creator, '_impl', None) or creator  # BN's implementation
    return type(node).__module__.startswith('cpu_engine')


def _patched(name):
    @functools.wraps(ENGINE[name])
    def call(*args, **kwargs):
        if _state['own']:
            return CHAINER[name](*args, **kwargs)
        if _state['paths'] == 'channels-last':
            args = [_channels_last(a) for a in args]
        y = ENGINE[name](*args, **kwargs)
        first = y[0] if isinstance(y, tuple) else y
        kind = 'engine' if _engine_node(first) else 'delegated'
        _reached[name].add((_state['test'], kind))
        return y
    return call


def _link_forward(name):
    """The ``forward`` of :data:`LINKS`' ``name``: the engine's link's,
    or Chainer's inside :func:`chainers_own`."""
    engine = getattr(cpu_engine, name)

    def forward(self, x, *args, **kwargs):
        if _state['own']:
            return CHAINER_LINKS[name].forward(self, x, *args, **kwargs)
        if _state['paths'] == 'channels-last':
            x = _channels_last(x)
        with chainers_own():  # where the engine's link delegates
            y = engine.forward(self, x, *args, **kwargs)
        kind = 'engine' if _engine_node(y) else 'delegated'
        _reached[name].add((_state['test'], kind))
        return y
    return forward


class Convolution2D(cpu_engine.Convolution2D):
    forward = _link_forward('Convolution2D')


class BatchNormalization(cpu_engine.BatchNormalization):
    forward = _link_forward('BatchNormalization')


#: What ``chainer.links`` holds for the session (module-level classes, so
#: that Chainer's pickling tests find them).
LINKS = {'Convolution2D': Convolution2D,
         'BatchNormalization': BatchNormalization}


class _ChannelsLastCopy(chainer.FunctionNode):
    """The identity, whose output is stored as (N, H, W, C)."""

    def forward(self, inputs):
        return _nhwc(inputs[0]),

    def backward(self, indexes, grad_outputs):
        return grad_outputs


def _nhwc(x):
    return numpy.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(
        0, 3, 1, 2)


def _channels_last(a):
    """A 4-D float NumPy array (or variable) as a channels-last copy, in
    the same graph; anything else as it is."""
    if isinstance(a, chainer.Variable) and a.layout is not None:
        return a  # Chainer's own memory layouts
    array = a.array if isinstance(a, chainer.Variable) else a
    if (type(array) is not numpy.ndarray or array.ndim != 4
            or array.dtype.kind != 'f'):
        return a
    if isinstance(a, chainer.Variable):
        return _ChannelsLastCopy().apply((a,))[0]
    return _nhwc(a)


def _with_chainers_own(method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        with chainers_own():
            return method(*args, **kwargs)
    call.chainers_own = True
    return call


def pytest_addoption(parser):
    parser.addoption('--engine-paths', choices=PATHS, default='default',
                     help='which of the CPU engine\'s paths to take')


def pytest_configure(config):
    _state['paths'] = config.getoption('engine_paths')
    if _state['paths'] != 'default':
        # Every float32 convolution to oneDNN, whatever its size.
        for name in ('ONEDNN_MIN_PIXELS', 'ONEDNN_MIN_PIXELS_1X1',
                     'ROWS_MAX_PIXELS'):
            setattr(convolution_module, name, 0)
        chainer.config.cpu_channels_last = _state['paths'] == 'channels-last'
    for mark in ('cudnn', 'ideep', 'chainerx', 'slow'):
        config.addinivalue_line('markers', '{}: Chainer\'s'.format(mark))
    for name in NAMES:
        setattr(chainer.functions, name, _patched(name))
    for name in LINK_NAMES:
        setattr(chainer.links, name, LINKS[name])


def pytest_unconfigure(config):
    for name in NAMES:
        setattr(chainer.functions, name, CHAINER[name])
    for name in LINK_NAMES:
        setattr(chainer.links, name, CHAINER_LINKS[name])


def _reason(item):
    for key, reason in DESELECT:
        if item.get_closest_marker(key) is not None or (
                item.cls is not None and item.cls.__name__.startswith(key)):
            return reason
    return None


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        reason = _reason(item)
        if reason is None:
            kept.append(item)
            expected = getattr(item.cls, 'forward_expected', None)
            if expected is not None and not hasattr(expected,
                                                    'chainers_own'):
                item.cls.forward_expected = _with_chainers_own(expected)
        else:
            dropped.append(item)
            _deselected[reason] += 1
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _state['test'] = item.nodeid
    yield
    _state['test'] = None


def pytest_terminal_summary(terminalreporter):
    write = terminalreporter.write_line
    terminalreporter.section('CPU engine, {} paths, NumPy {}'.format(
        _state['paths'], numpy.__version__))
    for name in NAMES + LINK_NAMES:
        kinds = collections.Counter(kind for _, kind in _reached[name])
        write('{}: {} tests ran the engine\'s nodes, {} its delegation to '
              'Chainer'.format(name, kinds['engine'], kinds['delegated']))
    for reason, count in _deselected.most_common():
        write('deselected {}: {}'.format(count, reason))

"""Between this ResNet-50 and Chainer's ``chainer.links.ResNet50Layers``.

Both are He et al.'s ResNet-50 with the stride on the first 1x1
convolution of a down-sampling block and BN eps 2e-5; they differ in names
(``res2/0``, ``res2/1`` and ``fc`` here; ``res2/a``, ``res2/b1`` and
``fc6`` there) and in Chainer's bias on ``conv1``, which is folded into
``bn1``'s mean here (``bn(conv(x) + b)`` normalizes with ``mean - b``). So
Chainer's ImageNet-pretrained ResNet-50 (``ResNet-50-model.npz``, as
``ResNet50Layers`` reads it) can start a run, and a full-width 1000-class
model trained here loads into ``ResNet50Layers``.
"""
import re

import numpy

#: A key of ``ResNet50Layers``' arrays that this ResNet-50 lacks.
CHAINER_ONLY = 'conv1/b'


def chainer_name(name):
    """The ``ResNet50Layers`` name of one of this network's arrays
    (``res3/0/conv1/W`` -> ``res3/a/conv1/W``, ``fc/W`` -> ``fc6/W``)."""
    name = name.lstrip('/')
    match = re.match(r'^(res\d)/(\d+)/(.*)$', name)
    if match:
        block, index, rest = match.groups()
        return '{}/{}/{}'.format(block, 'a' if index == '0' else
                                 'b' + index, rest)
    return re.sub(r'^fc/', 'fc6/', name)


def _arrays(link):
    """Every parameter and persistent array of ``link`` by path."""
    arrays = {name.lstrip('/'): p.array for name, p in link.namedparams()}
    for path, child in link.namedlinks():
        for persistent in child._persistent:
            value = getattr(child, persistent)
            if isinstance(value, numpy.ndarray):
                arrays['{}/{}'.format(path.lstrip('/'), persistent).lstrip(
                    '/')] = value
    return arrays


def to_resnet50_layers(network, layers):
    """Copy ``network`` (this ResNet-50, full width) into ``layers`` (a
    ``chainer.links.ResNet50Layers``, built with ``pretrained_model=None``);
    their class counts must agree."""
    theirs = _arrays(layers)
    _copy(_arrays(network), theirs, chainer_name, to_theirs=True)
    theirs[CHAINER_ONLY][...] = 0


def from_resnet50_layers(layers, network):
    """Copy ``layers`` (``chainer.links.ResNet50Layers``) into ``network``
    (this ResNet-50, full width, as many classes), ``conv1``'s bias folded
    into ``bn1``'s mean."""
    from_chainer_arrays(_arrays(layers), network)


def chainer_shapes(network):
    """The shape of every array :func:`from_chainer_arrays` reads for
    ``network``, by its ``ResNet50Layers`` name: a file's headers can be
    checked against them before any array is read."""
    shapes = {chainer_name(name): array.shape
              for name, array in _arrays(network).items()}
    shapes[CHAINER_ONLY] = network.bn1.avg_mean.shape
    return shapes


def from_chainer_arrays(theirs, network):
    """:func:`from_resnet50_layers` from ``ResNet50Layers``' arrays by name
    (a ``ResNet-50-model.npz`` as loaded)."""
    _copy(_arrays(network), theirs, chainer_name, to_theirs=False)
    network.bn1.avg_mean -= theirs[CHAINER_ONLY]


def _copy(mine, theirs, name_of, to_theirs):
    """Copy every array of ``mine`` to or from its namesake in ``theirs``,
    of the same shape."""
    for name, array in mine.items():
        other = theirs[name_of(name)]
        if other.shape != array.shape:
            raise ValueError('{} has shape {} here, {} in ResNet50Layers'
                             .format(name, array.shape, other.shape))
        if to_theirs:
            other[...] = array
        else:
            array[...] = other

"""ResNet-50 as in Chainer's ImageNet example, with global average pooling.

Bottlenecks 3-4-6-3, the stride on the first 1x1 convolution of a
down-sampling block, no convolution bias, He-normal initialization and
BN eps 2e-5: 25,557,032 parameters at 1000 classes. Global average pooling
instead of a fixed 7x7 pooling lets smoke runs use any input side >= 32 px.
"""
import chainer
import chainer.functions as F
import chainer.links as L
from chainer import initializers

from models import chainer_layers

BN_EPS = 2e-5


class BottleNeck(chainer.Chain):
    """1x1 -> 3x3 -> 1x1 bottleneck with an identity or projection shortcut.

    ``norm(size, eps=...)`` builds each normalization link; ``layers`` gives
    the convolution link and the functions (see :class:`ResNet50`).
    """

    def __init__(self, in_size, ch, out_size, stride, norm, layers):
        super(BottleNeck, self).__init__()
        self.add_relu, self.fork = layers.add_relu, layers.fork
        w = initializers.HeNormal()
        self.projection = in_size != out_size or stride != 1
        with self.init_scope():
            self.conv1 = layers.Convolution2D(in_size, ch, 1, stride, 0,
                                              initialW=w, nobias=True)
            self.bn1 = norm(ch, eps=BN_EPS)
            self.conv2 = layers.Convolution2D(ch, ch, 3, 1, 1, initialW=w,
                                              nobias=True)
            self.bn2 = norm(ch, eps=BN_EPS)
            self.conv3 = layers.Convolution2D(ch, out_size, 1, 1, 0,
                                              initialW=w, nobias=True)
            self.bn3 = norm(out_size, eps=BN_EPS)
            if self.projection:
                self.conv4 = layers.Convolution2D(in_size, out_size, 1, stride,
                                                  0, initialW=w, nobias=True)
                self.bn4 = norm(out_size, eps=BN_EPS)

    def forward(self, x):
        x, shortcut = self.fork(x)
        h = self.bn1(self.conv1(x), relu=True)
        h = self.bn2(self.conv2(h), relu=True)
        h = self.bn3(self.conv3(h))
        if self.projection:
            shortcut = self.bn4(self.conv4(shortcut))
        return self.add_relu(h, shortcut)


class Block(chainer.ChainList):
    """``n_layers`` bottlenecks; the first one changes size and stride."""

    def __init__(self, n_layers, in_size, ch, out_size, stride, norm, layers):
        super(Block, self).__init__()
        self.add_link(BottleNeck(in_size, ch, out_size, stride, norm, layers))
        for _ in range(n_layers - 1):
            self.add_link(BottleNeck(out_size, ch, out_size, 1, norm, layers))

    def forward(self, x):
        for link in self:
            x = link(x)
        return x


class ResNet50(chainer.Chain):
    """ResNet-50; calling it on ``x`` (N, 3, H, W) returns logits (N, n_class).

    Args:
        n_class: number of output classes.
        norm: factory of the normalization links, called as
            ``norm(size, eps=...)``; ``layers.BatchNormalization`` (moving
            averages) by default. A link is called as ``link(x)`` or
            ``link(x, relu=True)``, which returns ``relu`` of its output
            (computed with it, where the layer set can).
        layers: the links and functions the network is built from, a module
            or object with ``Convolution2D``, ``BatchNormalization``,
            ``add_relu``, ``fork`` and ``max_pooling_2d``:
            :mod:`models.chainer_layers` (Chainer's own) by default.
        width: multiplier of every channel count (rounded, at least 1), for
            small-scale studies; 1.0 is the paper's network.
    """

    insize = 224

    def __init__(self, n_class=1000, norm=None, layers=chainer_layers,
                 width=1.0):
        super(ResNet50, self).__init__()
        if width <= 0:
            raise ValueError('ResNet50 width must be positive, got {}'.format(
                width))
        self.n_class = n_class
        self.max_pooling_2d = layers.max_pooling_2d
        norm = norm or layers.BatchNormalization

        def c(channels):
            return max(1, int(round(channels * width)))

        with self.init_scope():
            self.conv1 = layers.Convolution2D(
                3, c(64), 7, 2, 3, initialW=initializers.HeNormal(),
                nobias=True)
            self.bn1 = norm(c(64), eps=BN_EPS)
            self.res2 = Block(3, c(64), c(64), c(256), 1, norm, layers)
            self.res3 = Block(4, c(256), c(128), c(512), 2, norm, layers)
            self.res4 = Block(6, c(512), c(256), c(1024), 2, norm, layers)
            self.res5 = Block(3, c(1024), c(512), c(2048), 2, norm, layers)
            self.fc = L.Linear(c(2048), n_class)

    def forward(self, x):
        if x.shape[2] < 32 or x.shape[3] < 32:
            raise ValueError('ResNet50 needs inputs of at least 32x32 pixels, '
                             'got {}x{}'.format(x.shape[2], x.shape[3]))
        h = self.bn1(self.conv1(x), relu=True)
        h = self.max_pooling_2d(h, 3, stride=2)
        h = self.res2(h)
        h = self.res3(h)
        h = self.res4(h)
        h = self.res5(h)
        h = F.average(h, axis=(2, 3))
        return self.fc(h)


def zero_init_residual(model):
    """Set the last BN gamma of every bottleneck in ``model`` to 0, so that
    each block starts as its shortcut (Goyal et al. 2017)."""
    for link in model.links():
        if isinstance(link, BottleNeck):
            link.bn3.gamma.array[...] = 0

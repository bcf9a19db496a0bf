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

import functions

BN_EPS = 2e-5


class BottleNeck(chainer.Chain):
    """1x1 -> 3x3 -> 1x1 bottleneck with an identity or projection shortcut.

    ``norm(size, eps=..., initial_gamma=...)`` builds each normalization
    link; ``zero_init_residual`` starts the last one of the residual branch
    at gamma = 0 so that the block begins as its shortcut (Goyal et al.).
    """

    def __init__(self, in_size, ch, out_size, stride, norm,
                 zero_init_residual=False):
        super(BottleNeck, self).__init__()
        w = initializers.HeNormal()
        last_gamma = initializers.Zero() if zero_init_residual else None
        self.projection = in_size != out_size or stride != 1
        with self.init_scope():
            self.conv1 = functions.Convolution2D(in_size, ch, 1, stride, 0,
                                                 initialW=w, nobias=True)
            self.bn1 = norm(ch, eps=BN_EPS)
            self.conv2 = functions.Convolution2D(ch, ch, 3, 1, 1,
                                                 initialW=w, nobias=True)
            self.bn2 = norm(ch, eps=BN_EPS)
            self.conv3 = functions.Convolution2D(ch, out_size, 1, 1, 0,
                                                 initialW=w, nobias=True)
            self.bn3 = norm(out_size, eps=BN_EPS, initial_gamma=last_gamma)
            if self.projection:
                self.conv4 = functions.Convolution2D(
                    in_size, out_size, 1, stride, 0, initialW=w, nobias=True)
                self.bn4 = norm(out_size, eps=BN_EPS)

    def forward(self, x):
        h = functions.relu(self.bn1(self.conv1(x)))
        h = functions.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        shortcut = self.bn4(self.conv4(x)) if self.projection else x
        return functions.add_relu(h, shortcut)


class Block(chainer.ChainList):
    """``n_layers`` bottlenecks; the first one changes size and stride."""

    def __init__(self, n_layers, in_size, ch, out_size, stride, norm,
                 zero_init_residual=False):
        super(Block, self).__init__()
        self.add_link(BottleNeck(in_size, ch, out_size, stride, norm,
                                 zero_init_residual))
        for _ in range(n_layers - 1):
            self.add_link(BottleNeck(out_size, ch, out_size, 1, norm,
                                     zero_init_residual))

    def forward(self, x):
        for link in self:
            x = link(x)
        return x


class ResNet50(chainer.Chain):
    """ResNet-50; calling it on ``x`` (N, 3, H, W) returns logits (N, n_class).

    Args:
        n_class: number of output classes.
        norm: factory of the normalization links, called as
            ``norm(size, eps=..., initial_gamma=...)``;
            ``functions.BatchNormalization`` (Chainer's, moving averages) by
            default.
        zero_init_residual: zero-init the last BN gamma of every block.
        width: multiplier of every channel count (rounded, at least 1), for
            small-scale studies; 1.0 is the paper's network.
    """

    insize = 224

    def __init__(self, n_class=1000, norm=functions.BatchNormalization,
                 zero_init_residual=False, width=1.0):
        super(ResNet50, self).__init__()
        if width <= 0:
            raise ValueError('ResNet50 width must be positive, got {}'.format(
                width))
        self.n_class = n_class

        def c(channels):
            return max(1, int(round(channels * width)))

        with self.init_scope():
            self.conv1 = functions.Convolution2D(
                3, c(64), 7, 2, 3, initialW=initializers.HeNormal(),
                nobias=True)
            self.bn1 = norm(c(64), eps=BN_EPS)
            self.res2 = Block(3, c(64), c(64), c(256), 1, norm,
                              zero_init_residual)
            self.res3 = Block(4, c(256), c(128), c(512), 2, norm,
                              zero_init_residual)
            self.res4 = Block(6, c(512), c(256), c(1024), 2, norm,
                              zero_init_residual)
            self.res5 = Block(3, c(1024), c(512), c(2048), 2, norm,
                              zero_init_residual)
            self.fc = L.Linear(c(2048), n_class)

    def forward(self, x):
        if x.shape[2] < 32 or x.shape[3] < 32:
            raise ValueError('ResNet50 needs inputs of at least 32x32 pixels, '
                             'got {}x{}'.format(x.shape[2], x.shape[3]))
        h = functions.relu(self.bn1(self.conv1(x)))
        h = functions.max_pooling_2d(h, 3, stride=2)
        h = self.res2(h)
        h = self.res3(h)
        h = self.res4(h)
        h = self.res5(h)
        h = F.average(h, axis=(2, 3))
        return self.fc(h)

"""CPU fast paths for training on NumPy arrays, as Chainer FunctionNodes.

Activations are kept channel-major (:mod:`functions.channel_major`);
GPU arrays go through Chainer's own functions unchanged.
"""
from functions import cpu_runtime  # NOQA
from functions.batch_normalization import batch_normalization  # NOQA
from functions.convolution_2d import convolution_2d  # NOQA
from functions.links import BatchNormalization  # NOQA
from functions.links import Convolution2D  # NOQA
from functions.max_pooling_2d import max_pooling_2d  # NOQA
from functions.relu import add_relu  # NOQA
from functions.relu import relu  # NOQA

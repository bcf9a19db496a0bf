"""CPU fast paths for training on NumPy arrays, as Chainer FunctionNodes.

The package is a layer set with the names of :mod:`models.chainer_layers`
(``Convolution2D``, ``BatchNormalization``, ``batch_normalization``,
``relu``, ``add_relu``, ``fork``, ``max_pooling_2d``), so a model built with
``layers=cpu_engine`` trains on it; :mod:`cpu_engine.updates` is the kernel
set of the optimizer's updates (``cpu_kernels`` of
:func:`optimizers.recipes.create_optimizer`). Activations are kept
channels-last where oneDNN convolves them so
(:mod:`cpu_engine.channels_last`, AVX-512), else channel-major
(:mod:`cpu_engine.channel_major`); other arrays go through Chainer's own
functions unchanged. The training script imports the package
for CPU runs only: it loads oneDNN and OpenMP.
"""
from cpu_engine import cpu_runtime  # NOQA
from cpu_engine.batch_normalization import batch_normalization  # NOQA
from cpu_engine.convolution_2d import convolution_2d  # NOQA
from cpu_engine.fork import fork  # NOQA
from cpu_engine.links import BatchNormalization  # NOQA
from cpu_engine.links import Convolution2D  # NOQA
from cpu_engine.max_pooling_2d import max_pooling_2d  # NOQA
from cpu_engine.relu import add_relu  # NOQA
from cpu_engine.relu import relu  # NOQA
from cpu_engine import updates  # NOQA

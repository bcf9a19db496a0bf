"""The trained network as a plain Chainer model, for use outside the trainer.

The trainer's network may hold :class:`FinalBatchNormalization` links (their
test mode normalizes with the last training batch's statistics), the CPU
engine's links, and a :class:`MixedPrecision` wrapper. None of them is
needed to run it: :func:`plain_copy` copies it into the same architecture
built from Chainer's own links in float32, with each final-batch
normalization's test-mode mean and variance as a
``chainer.links.BatchNormalization``'s ``avg_mean`` and ``avg_var``. In test
mode both normalize with ``fixed_batch_normalization(x, gamma, beta, mean,
var, eps)``, so the copy computes what the trained network computes (to the
bit, for a float32 network on Chainer's functions).
"""
import chainer
import numpy

from models.final_batch_normalization import FinalBatchNormalization
from models.mixed_precision import MixedPrecision


def plain_copy(trained, build):
    """A plain float32 copy of ``trained``'s weights and test-mode statistics.

    Args:
        trained (~chainer.Link): the trainer's network, on any device.
        build: called with no arguments (under float32), it returns the
            same architecture built with Chainer's links on the CPU
            (``functools.partial(models.ResNet50, n_class, width=width)``).

    Returns:
        The built network, its arrays float32 copies of ``trained``'s.
    """
    if isinstance(trained, MixedPrecision):
        trained = trained.network
    with chainer.using_config('dtype', numpy.float32):
        plain = build()
    params = dict(plain.namedparams())
    if ({name: p.shape for name, p in params.items()} !=
            {name: p.shape for name, p in trained.namedparams()}):
        raise ValueError('plain_copy: the two networks differ in their '
                         'parameters')
    for name, param in trained.namedparams():
        _assign(params[name].array, param.array)
    links = dict(plain.namedlinks())
    for name, link in trained.namedlinks():
        if isinstance(link, FinalBatchNormalization):
            mean, var = link.statistics()
        elif isinstance(link, chainer.links.BatchNormalization):
            mean, var = link.avg_mean, link.avg_var
        else:
            continue
        _assign(links[name].avg_mean, mean)
        _assign(links[name].avg_var, var)
    return plain


def _assign(destination, source):
    destination[...] = chainer.backend.CpuDevice().send(source).astype(
        numpy.float32)


def mixed16_copy(plain, build):
    """``plain``'s network as the trainer ran it under ``--dtype mixed16``:
    built by ``build`` under ``chainer.mixed16`` (float16 weights, float32
    normalization parameters and statistics) behind
    :class:`MixedPrecision`'s float32 ends, its arrays ``plain``'s cast
    back (exactly: the float32 copy of a float16 value is that value). It
    scores a validation set as the trainer's closing line did."""
    with chainer.using_config('dtype', chainer.mixed16):
        network = build()
    params = dict(plain.namedparams())
    for name, param in network.namedparams():
        param.array[...] = params[name].array.astype(param.dtype)
    links = dict(plain.namedlinks())
    for name, link in network.namedlinks():
        if isinstance(link, chainer.links.BatchNormalization):
            link.avg_mean[...] = links[name].avg_mean
            link.avg_var[...] = links[name].avg_var
    return MixedPrecision(network)

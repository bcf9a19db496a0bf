"""float32 master copies of float16 parameters, saved in snapshots.

Under ``chainer.mixed16`` the convolution and linear weights are float16
(normalization parameters stay float32). ``optimizer.use_fp32_update()``
makes the update rule of each float16 parameter keep a float32 copy, unscale
the gradient into it, update it in float32 and round it back into the
parameter. Chainer's ``Optimizer.serialize`` saves the rules' state but not
that copy, so a resumed run would restart from the rounded weights and drift
from the uninterrupted one; :func:`serialize` saves and restores it beside
the rule's state, as ``<param>/fp32_param``. A rule makes its master and
its state at its first update, and Chainer cannot load a snapshot that
lacks the state; with loss scaling the first updates may all be skipped,
so :func:`initialize` makes both before a snapshot, as that update would.
"""
import numpy

from chainer import variable


def _masters(optimizer):
    """(path, param, rule) of every float16 parameter with a master."""
    for name, param in optimizer.target.namedparams():
        rule = param.update_rule
        if (rule is not None and rule._use_fp32_update
                and param.array is not None
                and param.dtype == numpy.float16):
            yield name, param, rule


def initialize(optimizer):
    """Make the masters and every rule's state that no update has made."""
    for _, param, rule in _masters(optimizer):
        if rule._fp32_param is None:  # as the rule makes it at its update
            rule._fp32_param = variable.Parameter(
                param.array.astype(numpy.float32), name=param.name)
    for param in optimizer.target.params():
        rule = param.update_rule
        if rule is not None and rule.state is None \
                and param.array is not None:
            rule._init_states(rule._fp32_param if param.dtype ==
                              numpy.float16 and rule._use_fp32_update
                              else param)


def serialize(optimizer, serializer):
    """Save or load the float32 masters of ``optimizer``'s float16 params.

    Args:
        optimizer: a set-up ``GradientMethod`` (or ChainerMN's wrapper).
        serializer: its serializer, e.g. ``updater_serializer['optimizer:
            main']``; nothing is written when no parameter has a master.
    """
    initialize(optimizer)
    for name, _, rule in _masters(optimizer):
        master = rule._fp32_param
        master.array = serializer[name]('fp32_param', master.array)

"""The gradients a communicator averages, with their parameter paths."""


def named_gradients(model, zero_fill):
    """(path, param) of every gradient to all-reduce, sorted by path.

    The same selection and order as ChainerMN's communicators (so buffers
    line up on every worker): parameters with data and a gradient, or with
    ``zero_fill`` every parameter with data, whose missing gradient is
    filled with zeros.
    """
    named = []
    for name, param in sorted(model.namedparams()):
        if param.data is None:
            continue
        if param.grad is None:
            if not zero_fill:
                continue
            param.grad = param.xp.zeros_like(param.data)
        named.append((name, param))
    return named

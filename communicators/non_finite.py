"""The error raised when an all-reduced gradient holds inf or NaN.

The reduced buffer is the same on every worker, so each one detects the
same non-finite elements locally and raises together, before the gradients
reach the optimizer.
"""


class NonFiniteGradientError(RuntimeError):
    """The averaged gradient is not finite; the update must not be applied.

    Attributes:
        count (int): number of non-finite elements.
        param_name (str): path of the first parameter that holds one.
    """

    def __init__(self, count, param_name):
        self.count = count
        self.param_name = param_name
        super(NonFiniteGradientError, self).__init__(
            'all-reduced gradient has {} non-finite element(s), the first in '
            '{}'.format(count, param_name))

    @classmethod
    def at(cls, count, first_index, named_params):
        """The error for ``count`` elements, the first at ``first_index`` of
        the buffer that packs the gradients of ``named_params`` in order."""
        end = 0
        for name, param in named_params:
            end += param.grad.size
            if first_index < end:
                return cls(count, name)
        raise IndexError('element {} lies beyond the packed gradients'
                         .format(first_index))

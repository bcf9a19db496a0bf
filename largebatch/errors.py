"""The errors that end a training job, shared by every package.

``InputError`` is bad input (a flag, file or line): the job ends with its
one-line message and exit status 2. ``NonFiniteGradientError`` is an
all-reduced gradient holding inf or NaN: every worker sees the same reduced
buffer, so all raise together, before the optimizer applies it; like
ChainerMN's own check it is a ``ValueError`` whose message says the
gradient diverged.
"""

#: The exit status of a job ended by a ``NonFiniteGradientError``, which the
#: study drivers record as a diverged run.
DIVERGED_STATUS = 3

#: The exit status of a job stopped by SIGTERM or SIGUSR1 after it saved a
#: snapshot of its last update: job scripts requeue it with --resume auto.
STOPPED_STATUS = 4

#: The exit status of a job whose watchdog found a stalled worker
#: (:mod:`imagenet_job.stall_watchdog`): job scripts requeue it like a stop,
#: and it resumes from its newest snapshot.
STALLED_STATUS = 5


def out_of_memory_text(error):
    """What a MemoryError says (NumPy's and CuPy's name the allocation that
    failed), without its closing period, for a one-line ending."""
    return str(error).rstrip('.') or 'out of memory'


class InputError(ValueError):
    """Bad input: its message is one line naming the file, line or flag."""


class NonFiniteGradientError(ValueError):
    """The averaged gradient is not finite; the update must not be applied.

    ChainerMN's communicators raise ``ValueError('Parameters diverged after
    allreduce.')`` in debug mode; this one is a ``ValueError`` too, and says
    how many elements and where.

    Attributes:
        count (int): number of non-finite elements.
        param_name (str): path of the first parameter that holds one.
    """

    def __init__(self, count, param_name):
        self.count = count
        self.param_name = param_name
        super(NonFiniteGradientError, self).__init__(
            'all-reduced gradient diverged: {} non-finite element(s), the '
            'first in {}'.format(count, param_name))

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


class LoaderDiedError(RuntimeError):
    """A loader process ended before it returned its images (killed, as the
    out-of-memory killer kills, or crashed): the job ends, since the images
    it held are lost and the worker would wait for them for ever."""

    def __init__(self):
        super(LoaderDiedError, self).__init__(
            'a loader process ended abruptly (killed, as the out-of-memory '
            'killer kills, or crashed); the images it was loading are lost')


class ParameterError(ValueError):
    """A library parameter out of its range; the script names the flag.

    Attributes:
        name (str): the parameter, e.g. ``'momentum'``.
        value: the value given.
        expected (str): what it must be, e.g. ``'in [0, 1)'``.
    """

    def __init__(self, name, value, expected):
        self.name, self.value, self.expected = name, value, expected
        super(ParameterError, self).__init__(
            '{} must be {}, got {!r}'.format(name, expected, value))

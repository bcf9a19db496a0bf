"""Bad input that every worker meets together, and the flag that names it.

The workers check what they were given alike (their flags, the datasets rank
0 read, the snapshot); :func:`agree` makes the check collective, so that
every worker raises the same :class:`JobInputError` and none waits in a
collective for one that left. :func:`naming` puts the flag before a
library's error, which names only its parameter or value.
"""
import contextlib

from largebatch.errors import InputError
from largebatch.errors import ParameterError


class JobInputError(InputError):
    """Bad input that every worker has raised together (see :func:`agree`).
    """


def agree(comm, check, *args, **kwargs):
    """``check(*args, **kwargs)`` on every worker; if it raised
    :class:`InputError` on any, :class:`JobInputError` with the first message
    on all of them. Another exception is raised again where it was raised,
    after the others have learnt of it (and raise :class:`JobInputError`
    naming that worker), so that no worker waits for one that left."""
    result, failures = gathered(comm.mpi_comm, check, *args, **kwargs)
    failures = [f for f in failures if f]
    if failures:
        raise JobInputError(failures[0])
    return result


def gathered(mpi_comm, check, *args, **kwargs):
    """``(result, failures)``: ``check(*args, **kwargs)``'s result here and
    every worker's :class:`InputError` message (None where it passed), in
    rank order; another exception as :func:`agree` raises it."""
    result, failure, error = None, None, None
    try:
        result = check(*args, **kwargs)
    except InputError as e:
        failure = str(e)
    except Exception as e:
        error = e
        failure = 'worker {} failed ({}: {})'.format(
            mpi_comm.rank, type(e).__name__, e)
    failures = mpi_comm.allgather(failure)
    if error is not None:
        raise error
    return result, failures


@contextlib.contextmanager
def naming(flag=None):
    """Errors about a value the job was given name the flag that gave it,
    the same way everywhere:

    - :class:`ParameterError` names its own flag (``lr`` -> ``--lr must be
      finite, got nan``);
    - :class:`InputError`, whose message starts with the value (a path),
      gets the flag before it: ``--mean m.npy: no such file``;
    - another library ``ValueError``: ``FLAG: message``.

    The first and the last come from checks every worker makes alike, so
    they end the job as :class:`JobInputError`, as does an error that every
    worker already raised together."""
    try:
        yield
    except ParameterError as e:
        raise JobInputError('--{} must be {}, got {}'.format(
            e.name.replace('_', '-'), e.expected, e.value)) from None
    except InputError as e:
        together = isinstance(e, JobInputError)
        raise (JobInputError if together else InputError)(
            '{} {}'.format(flag, e) if flag else str(e)) from None
    except ValueError as e:
        raise JobInputError('{}: {}'.format(flag, e) if flag else str(e)) \
            from None

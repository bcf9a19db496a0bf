"""What a launcher tells the processes it starts, in their environment: read
before MPI starts, and where a process may have no launcher at all."""
import os

from largebatch.errors import InputError

#: Set in every process that an MPI launcher starts.
LAUNCHED = ('OMPI_COMM_WORLD_SIZE', 'PMIX_RANK', 'PMI_RANK', 'PMI_SIZE')

#: Where launchers give a process its rank, the MPI launchers' first
#: (within a Slurm step, ``SLURM_PROCID`` is srun's).
RANK_VARIABLES = ('OMPI_COMM_WORLD_RANK', 'PMIX_RANK', 'PMI_RANK',
                  'SLURM_PROCID')


def launched():
    """Whether an MPI launcher started this process."""
    return any(name in os.environ for name in LAUNCHED)


def rank():
    """This process's rank as its launcher gives it; 0 without one.
    Raises :class:`InputError` naming a variable that holds no rank."""
    name = next((name for name in RANK_VARIABLES if name in os.environ), None)
    if name is None:
        return 0
    value = os.environ[name]
    if not (value.isascii() and value.isdigit()):
        raise InputError(
            '{}={}: not a rank (a non-negative integer); unset it, or start '
            'the job with the launcher that sets it'.format(name, value))
    return int(value)

"""Every worker trains on rank 0's settings: the flags it resolved, and the
content of each file a flag names that every worker reads itself.

Workers started with different flags (``mpiexec -n 1 ... --lr 0.1 : -n 1
... --lr 5``), or given per-node copies of a ``--mean`` file that differ,
would train on different settings while ``args.json`` records rank 0's.
Before training, rank 0's settings go to every worker, each compares them
with its own, and the first difference ends the job with one line naming
the flag (:func:`imagenet_job.agreement.agree`).
"""
import hashlib
import os
import stat

from imagenet_job import arguments
from imagenet_job.agreement import agree
from largebatch.errors import InputError

#: Flags that may differ between workers: ``--device @cupy:N`` names the
#: worker's own GPU (no two workers may share one).
PER_WORKER = ('device',)

#: Bytes hashed at each end of a file for its fingerprint.
END_BYTES = 1 << 20

#: What a differing flag's and a differing file's lines end with.
SAME_FLAGS = 'start every worker with the same flags'
SAME_FILES = 'give every worker the same file'


def agree_on_settings(comm, args):
    """End the job (:class:`imagenet_job.agreement.JobInputError`, on every
    worker) unless every worker of ``comm`` has rank 0's
    :func:`settings_of` flags ``args``."""
    mine = agree(comm, settings_of, args)
    reference = comm.mpi_comm.bcast(mine if comm.rank == 0 else None, root=0)
    agree(comm, check_same, mine, reference, comm.rank)


def settings_of(args):
    """``(flags, files)``: every flag's value by its name (``--lr``,
    ``train``) but :data:`PER_WORKER`'s, and the :func:`fingerprint` of each
    file that every worker reads itself: ``--mean``, ``--initmodel``, a
    ``--resume`` snapshot, ``.npz`` data sets (rank 0 alone reads the other
    data sets and broadcasts them)."""
    names = arguments.flag_names()
    flags = {names.get(name, name): value
             for name, value in vars(args).items() if name not in PER_WORKER}
    paths = {'--mean': args.mean, '--initmodel': args.initmodel,
             '--resume': None if args.resume == 'auto' else args.resume}
    paths.update((names[name], path) for name, path in (
        ('train', args.train), ('val', args.val)) if path.endswith('.npz'))
    return flags, {flag: fingerprint(path) for flag, path in paths.items()
                   if path}


def fingerprint(path, end_bytes=END_BYTES):
    """``SIZE bytes sha256:HEX``: the file's size and the SHA-256 of its
    first and last ``end_bytes`` (all of a file of up to twice that), or
    why it was not read. The large files are ``.npz`` (models, snapshots,
    decoded data sets): zip archives whose directory, at their end, holds
    every member's CRC-32, so their tail stands for their content; a
    bounded read keeps the start short for a thousand workers on one file
    system. The modification time is left out: a copy differs in it. A path
    that is no regular file is not read (a FIFO would block)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), 'rb') as f:
            size = os.fstat(f.fileno())
            if not stat.S_ISREG(size.st_mode):
                return 'not a regular file'
            size = size.st_size
            digest = hashlib.sha256(f.read(end_bytes))
            if size > end_bytes:
                f.seek(max(end_bytes, size - end_bytes))
                digest.update(f.read(end_bytes))
    except OSError as e:
        return 'unreadable ({})'.format(e.strerror or e)
    return '{:,} bytes sha256:{}'.format(size, digest.hexdigest()[:16])


def check_same(mine, reference, rank):
    """:class:`InputError` naming the first flag, then the first file, whose
    value in ``mine`` (this worker's, rank ``rank``) differs from rank 0's
    ``reference`` (both :func:`settings_of`)."""
    (flags, files), (flags_0, files_0) = mine, reference
    for name in sorted(set(flags) | set(flags_0)):
        if flags.get(name, _NO_FLAG) != flags_0.get(name, _NO_FLAG):
            raise InputError(_differs(name, flags_0, flags, rank, SAME_FLAGS))
    for name in sorted(set(files) | set(files_0)):
        if files.get(name) != files_0.get(name):
            raise InputError(_differs('{} {}'.format(name, flags[name]),
                                      files_0, files, rank, SAME_FILES))


#: How a flag that a worker's script does not have is shown.
_NO_FLAG = '(no such flag)'


def _differs(what, values_0, values, rank, advice):
    """``WHAT differs between workers: A on rank 0, B on rank N; ADVICE``."""
    def shown(values, name):
        value = values.get(name, _NO_FLAG)
        return 'unset' if value is None else value
    name = what.split()[0]
    return '{} differs between workers: {} on rank 0, {} on rank {}; {}' \
        .format(what, shown(values_0, name), shown(values, name), rank,
                advice)

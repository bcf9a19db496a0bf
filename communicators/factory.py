"""``create_communicator``: ChainerMN's communicators and the float16 ones."""
import dataclasses

import chainermn
import numpy

from communicators.cuda_aware import cuda_aware_mpi
from communicators.mpi_start import library_name
from communicators.mpi_start import start_mpi

CHAINERMN_NAMES = ('naive', 'flat', 'non_cuda_aware', 'pure_nccl', 'dummy')
FP16_NAMES = ('mpi_fp16', 'pure_nccl_fp16')
NAMES = CHAINERMN_NAMES + FP16_NAMES
ALLREDUCE_DTYPES = ('float32', 'float16')
#: The communicators that need NCCL, and so GPUs (``non_cuda_aware`` within a
#: node). ChainerMN's ``naive`` and ``flat`` take GPU arrays through a
#: CUDA-aware MPI instead.
NCCL_NAMES = ('non_cuda_aware', 'pure_nccl', 'pure_nccl_fp16')
#: ChainerMN's communicators that hand MPI GPU arrays on GPUs: they need a
#: CUDA-aware MPI.
MPI_GPU_NAMES = ('naive', 'flat')
#: ChainerMN's NCCL communicators: ChainerMN packs their gradients itself.
CHAINERMN_NCCL_NAMES = ('non_cuda_aware', 'pure_nccl')
#: The first CuPy whose ``cupy/carray.cuh`` no longer defines ``half``, the
#: type of ChainerMN's batched pack kernels.
CUPY_WITHOUT_CARRAY_HALF = 14
#: ChainerMN's communicators that Chainer 7's ChainerMN no longer has.
REMOVED = dict.fromkeys(
    ('hierarchical', 'two_dimensional', 'single_node'),
    ' (ChainerMN 7 removed it: pure_nccl, or pure_nccl_fp16, takes its '
    'place on GPUs)')

#: The communicators whose NCCL communicator spans every worker
#: (``nccl_comm``): the initial parameters are broadcast over it.
WORLD_NCCL_NAMES = ('pure_nccl', 'pure_nccl_fp16')


@dataclasses.dataclass(frozen=True)
class Abilities:
    """What a job needs to know of its communicator beyond ChainerMN's
    interface, stated by name rather than probed on the object.

    Attributes:
        world_nccl (bool): one NCCL communicator spans every worker, and
            broadcasts the initial parameters each dtype in its own.
        rounds_to_float16 (bool): the gradients travel in float16: a
            worker's gradient is rounded, as ``updaters.MicroBatchUpdater``
            rounds each virtual worker's.
        checks_non_finite (bool): the all-reduce checks the mean and raises
            :class:`NonFiniteGradientError` itself, so an optimizer hook
            need not check it again.
    """
    world_nccl: bool
    rounds_to_float16: bool
    checks_non_finite: bool


def abilities(name):
    """The :class:`Abilities` of communicator ``name`` (a name
    :func:`resolve_name` returns)."""
    return Abilities(world_nccl=name in WORLD_NCCL_NAMES,
                     rounds_to_float16=name in FP16_NAMES,
                     checks_non_finite=name in FP16_NAMES)


# The float16 communicator that replaces each name at allreduce_dtype
# 'float16': mpi_fp16 on CPUs, pure_nccl_fp16 on GPUs.
_FP16_OF = {
    'naive': 'mpi_fp16',
    'mpi_fp16': 'mpi_fp16',
    'pure_nccl': 'pure_nccl_fp16',
    'pure_nccl_fp16': 'pure_nccl_fp16',
}


def resolve_name(name, allreduce_dtype=None, gpu=False):
    """The communicator that :func:`create_communicator` makes of ``name``
    and ``allreduce_dtype`` on GPUs (``gpu``) or CPUs; ValueError (one line)
    for a combination that does not exist."""
    if name not in NAMES:
        raise ValueError('unknown communicator {!r}; expected one of: {}{}'
                         .format(name, ', '.join(NAMES),
                                 REMOVED.get(name, '')))
    if allreduce_dtype is None:
        allreduce_dtype = 'float16' if name in FP16_NAMES else 'float32'
    if allreduce_dtype not in ALLREDUCE_DTYPES:
        raise ValueError('unknown all-reduce dtype {!r}; expected one of: {}'
                         .format(allreduce_dtype, ', '.join(ALLREDUCE_DTYPES)))
    if allreduce_dtype == 'float16':
        if name not in _FP16_OF:
            raise ValueError(
                'communicator {!r} has no float16 all-reduce; float16 works '
                'with: {}'.format(name, ', '.join(_FP16_OF)))
        name = _FP16_OF[name]
    elif name in FP16_NAMES:
        raise ValueError(
            'communicator {!r} all-reduces in float16; for float32 use {}'
            .format(name, 'naive' if name == 'mpi_fp16' else 'pure_nccl'))
    if name in NCCL_NAMES and not gpu:
        raise ValueError('communicator {!r} needs GPUs (NCCL)'.format(name))
    if name == 'mpi_fp16' and gpu:
        raise ValueError(
            'communicator \'mpi_fp16\' all-reduces CPU (NumPy) gradients; on '
            'GPUs: pure_nccl_fp16, or naive or flat in float32 with a '
            'CUDA-aware MPI')
    return name


def create_communicator(name='naive', allreduce_dtype=None, mpi_comm=None,
                        gpu=False, dtype='float32'):
    """A ChainerMN communicator by name.

    Args:
        name (str): one of ChainerMN's names (``naive``, ``flat``,
            ``non_cuda_aware``, ``pure_nccl``, ``dummy``) or ``mpi_fp16``
            (CPU, MPI) or ``pure_nccl_fp16`` (GPU, NCCL).
        allreduce_dtype (str): ``'float16'`` turns ``naive`` into
            ``mpi_fp16`` and ``pure_nccl`` into ``pure_nccl_fp16``;
            ``'float32'`` with a float16 name is refused. ``None`` (the
            default): what the name says.
        mpi_comm: mpi4py communicator; ``MPI.COMM_WORLD`` by default.
        gpu (bool): whether the workers have GPUs; NCCL needs them,
            ``mpi_fp16`` takes CPU arrays only, and ``naive`` and ``flat``
            need an MPI that takes GPU arrays (:mod:`communicators.
            cuda_aware`).
        dtype (str): the gradients' dtype, ``'float32'`` or ``'mixed16'``
            (float16 gradients of the convolutions and linear layers).

    Raises:
        ValueError: unknown name or dtype, or a combination that does not
            exist; the message is one line.
    """
    name = resolve_name(name, allreduce_dtype, gpu)
    MPI = start_mpi()
    if gpu and name in MPI_GPU_NAMES and cuda_aware_mpi(MPI) is False:
        raise ValueError(
            'communicator {!r} hands MPI GPU arrays, and this MPI is not '
            'CUDA-aware ({}); on GPUs: pure_nccl or pure_nccl_fp16 (NCCL), '
            'or a CUDA-aware MPI'.format(name, library_name(MPI)))
    if mpi_comm is None:
        mpi_comm = MPI.COMM_WORLD
    # Imported here: ChainerMN's communicator modules initialize MPI.
    if name == 'mpi_fp16':
        from communicators.mpi_fp16_communicator import MpiFp16Communicator
        return MpiFp16Communicator(mpi_comm)
    if name == 'pure_nccl_fp16':
        from communicators.pure_nccl_fp16_communicator import \
            PureNcclFp16Communicator
        return PureNcclFp16Communicator(mpi_comm)
    if name in CHAINERMN_NCCL_NAMES:
        return _chainermn_nccl(name, mpi_comm, dtype)
    return chainermn.create_communicator(name, mpi_comm=mpi_comm)


def _chainermn_nccl(name, mpi_comm, dtype):
    """ChainerMN's NCCL communicator ``name``, summing in float32.

    ``pure_nccl`` is told float32: left to itself it sums in
    ``chainer.get_dtype()``, float16 under mixed16, unscaled. ChainerMN packs
    the gradients with raw kernels of the type ``half``, which CuPy 14's
    ``cupy/carray.cuh`` no longer defines, so from CuPy 14 on it copies them
    one by one; its per-array copy casts a float16 gradient with
    ``array(copy=False, dtype=...)``, which CuPy 14 refuses.
    """
    import cupy
    batched = int(cupy.__version__.split('.')[0]) < CUPY_WITHOUT_CARRAY_HALF
    if not batched and dtype == 'mixed16':
        raise ValueError(
            'communicator {!r} cannot unpack float16 gradients on CuPy {} '
            '(ChainerMN casts them with copy=False); with --dtype mixed16 '
            'use a float16 all-reduce (pure_nccl_fp16), or CuPy 13'.format(
                name, cupy.__version__))
    options = {'allreduce_grad_dtype': numpy.float32} \
        if name == 'pure_nccl' else {}
    comm = chainermn.create_communicator(name, mpi_comm=mpi_comm, **options)
    # set as set_config sets it: PureNcclCommunicator.set_config passes the
    # name on to its parent's without the value, which then sets True
    with comm.config_scope():
        comm.batched_copy = batched
    return comm

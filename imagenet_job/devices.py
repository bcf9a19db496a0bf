"""The worker's communicator and device: the CUDA stack checked first, the
GPU chosen by the worker's place on its node, each refusal one line naming
the flag that asked for it."""
import os
import socket

import chainer

import communicators
from largebatch import cuda_stack
from imagenet_job.agreement import agree
from imagenet_job.agreement import gathered
from imagenet_job.agreement import JobInputError
from imagenet_job.agreement import naming
from imagenet_job.nodes import ranges
from largebatch.errors import InputError


def gpu_flag_of(gpu, device):
    """The flag that asked for a GPU (``--gpu``, or ``--device`` with a
    CuPy device), None for a CPU run: the run's one answer to whether it
    trains on GPUs."""
    if gpu:
        return '--gpu'
    return '--device' if device.startswith('@cupy') else None


def requested_gpu(device):
    """The N of ``--device @cupy:N``, else None."""
    return int(device.split(':')[1]) if device.startswith('@cupy') else None


def create_communicator(name, allreduce_dtype, allow_no_cudnn, gpu_flag=None,
                        dtype='float32', requested_gpu=None):
    """ChainerMN's communicator ``name`` (None: ``pure_nccl`` on GPUs,
    ``naive`` on CPUs; ``allreduce_dtype`` float16 makes them
    ``pure_nccl_fp16`` and ``mpi_fp16``) for gradients of ``dtype``, and its
    :class:`communicators.Abilities`; on GPUs, which the flag ``gpu_flag``
    asked for (``requested_gpu``: the N of ``--device @cupy:N``), the CUDA
    stack is checked first."""
    name = name or ('pure_nccl' if gpu_flag else 'naive')
    if gpu_flag:
        check_gpu_stack(communicators.start_mpi().COMM_WORLD, gpu_flag,
                        allow_no_cudnn, name in communicators.NCCL_NAMES,
                        requested_gpu)
    with naming('--communicator {} --allreduce-dtype {}'.format(
            name, allreduce_dtype)):
        comm = communicators.create_communicator(
            name, allreduce_dtype, gpu=bool(gpu_flag), dtype=dtype)
        return comm, communicators.abilities(communicators.resolve_name(
            name, allreduce_dtype, gpu=bool(gpu_flag)))


def check_gpu_stack(mpi_comm, flag, allow_no_cudnn, need_nccl,
                    requested=None):
    """:func:`cuda_stack.check` on every worker of ``mpi_comm``, on the GPU
    each would train on, agreed: a stack that fails on one worker only (a
    node with a broken driver, a GPU held by a stale process) ends the job
    on every worker at once, as bad input does, with one line naming
    ``flag``, the worker, its node and GPU, and the cause. The others would
    otherwise wait in ChainerMN's start-up until the start's deadline."""
    hosts = mpi_comm.allgather(socket.gethostname())
    rank, size = mpi_comm.rank, mpi_comm.size
    intra_rank = hosts[:rank].count(hosts[rank])

    def check():
        try:
            cuda_stack.check(allow_no_cudnn, need_nccl, intra_rank, requested)
        except InputError as e:
            cause = str(e)
            if isinstance(e, cuda_stack.CudnnOffError):
                cause += ', or pass --allow-no-cudnn to train without it'
            if size > 1:
                cause = 'worker {} on {}, GPU {} (CUDA_VISIBLE_DEVICES={}): ' \
                    '{}'.format(rank, hosts[rank], intra_rank if requested
                                is None else requested, os.environ.get(
                                    'CUDA_VISIBLE_DEVICES', 'unset'), cause)
            raise InputError(cause) from None

    failures = gathered(mpi_comm, check)[1]
    failed = [r for r, failure in enumerate(failures) if failure]
    if failed:
        raise JobInputError('{}: {}{}'.format(
            flag, failures[failed[0]], '; workers {} failed it too'.format(
                ranges(failed[1:])) if len(failed) > 1 else ''))


def create_device(comm, gpu_flag, device, cudnn_autotune, cudnn_workspace):
    """The worker's Chainer device: ``device`` (``-1``, ``@numpy`` or
    ``@cupy:N``), or with ``--gpu`` (``gpu_flag``) the GPU of the worker's
    intra-node rank; on a GPU, cuDNN configured and the stack line printed
    by rank 0."""
    if gpu_flag is None:
        return chainer.get_device(device)
    gpu = gpu_flag == '--gpu'
    chosen = chainer.get_device('@cupy:{}'.format(choose_gpu(
        comm, '--gpu' if gpu else '--device ' + device,
        None if gpu else requested_gpu(device))))
    chosen.use()
    cuda_stack.configure_cudnn(cudnn_autotune, cudnn_workspace)
    if comm.rank == 0:
        print(cuda_stack.stack_line(chosen.device.id))
    return chosen


def choose_gpu(comm, flag, requested=None):
    """The id of the GPU this worker trains on (``requested``, or by its
    intra-node rank: :func:`cuda_stack.device_for`), refused in one line
    naming ``flag`` when it is not visible or two ranks would share it."""
    with naming(flag):
        device_id = agree(comm, cuda_stack.device_for, comm.intra_rank,
                          cuda_stack.visible_gpus(), requested)
        agree(comm, cuda_stack.check_not_shared,
              comm.mpi_comm.allgather(cuda_stack.placement(device_id)))
    return device_id

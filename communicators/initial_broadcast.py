"""Rank 0's parameters to every worker before the first update."""
import numpy

from chainer import backend

from half_precision import segmented


def broadcast_initial_parameters(optimizer, model, comm, world_nccl=False):
    """Broadcast rank 0's parameters now, so the first update is a real one.

    ChainerMN's multi-node optimizer spends the first ``update()`` after a
    start (or a resume) broadcasting instead of updating; doing the broadcast
    up front keeps every iteration an update and makes a resumed run follow
    the uninterrupted one step for step.

    With ``world_nccl`` (``pure_nccl`` and ``pure_nccl_fp16``:
    :class:`communicators.Abilities`) on GPUs, NCCL broadcasts each dtype's
    parameters in their own dtype (:func:`broadcast_by_dtype`).
    ChainerMN's ``pure_nccl`` ``bcast_data`` sends every parameter in
    ``chainer.get_dtype()``: under
    ``chainer.mixed16`` it would round the float32 normalization parameters
    to float16, and CuPy 14 refuses the cast it makes
    (``array(copy=False, dtype=...)``). MPI communicators send each array as
    it is.
    """
    if world_nccl and model.xp is not numpy:
        broadcast_by_dtype([param for _, param in sorted(
            model.namedparams())], nccl_broadcast(comm))
    else:
        comm.bcast_data(model)
    optimizer.is_changed(model)  # records the parameter set as broadcast


def broadcast_by_dtype(params, bcast):
    """Broadcast the arrays of ``params`` (the same list on every worker) in
    one call per dtype: ``bcast(flat)`` broadcasts a contiguous 1-d array
    from rank 0 in place."""
    params = [param for param in params if param.array is not None]
    for dtype in sorted({param.dtype for param in params}, key=str):
        group = [param for param in params if param.dtype == dtype]
        xp = backend.get_array_module(group[0].array)
        flat = xp.concatenate([param.array.ravel() for param in group])
        bcast(flat)
        offsets = segmented.offsets(group)
        for param, start, end in zip(group, offsets[:-1], offsets[1:]):
            param.array[...] = flat[start:end].reshape(param.shape)


def nccl_broadcast(comm):
    """``bcast(flat)`` over the NCCL communicator of ChainerMN's ``comm``."""
    from chainer.backends import cuda
    from chainermn.communicators import _communication_utility
    comm._init_comms()

    def bcast(flat):
        comm.nccl_comm.bcast(
            segmented.address(flat), flat.size,
            _communication_utility._get_nccl_type_id(flat.dtype), 0,
            cuda.Stream.null.ptr)
    return bcast

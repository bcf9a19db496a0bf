"""Whether the MPI library takes GPU buffers (is CUDA-aware).

ChainerMN's ``naive`` and ``flat`` hand MPI device pointers on GPUs; an MPI
that is not CUDA-aware reads them as host memory and crashes at the initial
broadcast or the first all-reduce. MPI itself cannot say; Open MPI's
``MPIX_Query_cuda_support()`` and MPICH's ``MPIX_GPU_query_support`` can,
after MPI has started, and other libraries are not asked.
"""
import ctypes

from communicators import mpi_start

#: MPICH's ``MPIX_GPU_SUPPORT_CUDA`` (mpi.h): the type of GPU asked about.
MPICH_GPU_SUPPORT_CUDA = 0


def cuda_aware_mpi(MPI):
    """True or False where the started MPI of mpi4py's module ``MPI`` says
    whether it is CUDA-aware, None where it cannot say."""
    library = mpi_start.library(MPI)
    if library is None:
        return None
    if hasattr(library, 'MPIX_Query_cuda_support'):  # Open MPI
        return bool(library.MPIX_Query_cuda_support())
    if hasattr(library, 'MPIX_GPU_query_support'):  # MPICH
        supported = ctypes.c_int()
        if library.MPIX_GPU_query_support(
                MPICH_GPU_SUPPORT_CUDA, ctypes.byref(supported)) == 0:
            return bool(supported.value)
    return None

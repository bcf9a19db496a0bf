"""A study's runs of ``train_imagenet.py``: the command that trains one on
a single MPI process, the entries of its log, and the machine it ran on."""
import json
import os
import platform
import sys

import numpy

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER = os.path.join(REPO, 'train_imagenet.py')


def mpi_command(args, trainer=TRAINER):
    """``python trainer args`` on one MPI process."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), 'mpiexec')
    cmd = [mpiexec, '--oversubscribe', '-n', '1', '-x', 'OMP_NUM_THREADS']
    if os.geteuid() == 0:
        cmd.append('--allow-run-as-root')
    return cmd + [sys.executable, trainer] + args


def read_log(run_dir):
    """The entries of a run's ``log`` (none before its first)."""
    path = os.path.join(run_dir, 'log')
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def validation_curve(entries, total, n_train):
    """``[(epoch, top-1), ...]`` from a run's log entries, ``total`` images
    per update on ``n_train`` training images."""
    return [(entry['iteration'] * total / n_train,
             entry['validation/main/accuracy'])
            for entry in entries if 'validation/main/accuracy' in entry]


#: OpenBLAS chooses its kernels by the CPU when it loads (an OpenBLAS older
#: than the CPU falls back to generic ones), and kernels for other
#: instruction sets round float32 sums differently: the same run parts at
#: its first update on an Intel Xeon and an AMD EPYC, as a run of another
#: seed would. Runs pin the AVX2 kernels wherever the CPU has AVX2, so a run
#: parked on one machine goes on with the same arithmetic on the next.
BLAS_KERNELS = 'Haswell'


def cpu_info(path='/proc/cpuinfo'):
    """The CPU's model name and its flags, from the first processor of
    ``path`` (``platform``'s name and no flags where it cannot be read)."""
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(':')
                if key.strip() == 'model name':
                    model = value.strip()
                elif key.strip() == 'flags':
                    flags = value.split()
                elif not line.strip():
                    break
    except OSError:
        pass
    return model, flags


def blas_environment(flags):
    """The environment that pins OpenBLAS's AVX2 kernels on a CPU with
    ``flags``; none where the CPU has no AVX2."""
    return {'OPENBLAS_CORETYPE': BLAS_KERNELS} if 'avx2' in flags else {}


def machine():
    """The CPU, core count and the versions that trained, in one line."""
    import chainer
    return '{} x {} cores ({}), Python {}, Chainer {}, NumPy {}'.format(
        cpu_info()[0], os.cpu_count(), platform.system(),
        platform.python_version(), chainer.__version__, numpy.__version__)

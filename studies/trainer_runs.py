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


def machine():
    """The CPU, core count and the versions that trained, in one line."""
    model = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            model = next(line.split(':', 1)[1].strip() for line in f
                         if line.startswith('model name'))
    except (OSError, StopIteration):
        pass
    import chainer
    return '{} x {} cores ({}), Python {}, Chainer {}, NumPy {}'.format(
        model, os.cpu_count(), platform.system(),
        platform.python_version(), chainer.__version__, numpy.__version__)

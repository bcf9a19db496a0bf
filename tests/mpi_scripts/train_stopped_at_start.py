"""train_imagenet.py whose rank RANK stops itself (SIGSTOP) while the job
starts, at STAGE: ``mpi``, before MPI starts (the others wait in MPI's
start-up), ``communicator``, between the communicator's creation and the
watchdog's (they wait in the watchdog's), or ``datasets``, as it starts to
read the datasets (they wait in a broadcast).

Usage: train_stopped_at_start.py RANK STAGE [train_imagenet arguments...]
"""
import os
import runpy
import signal
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

import image_data
from imagenet_job import devices
from imagenet_job import stall_watchdog

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'train_imagenet.py')
rank, stage = int(sys.argv[1]), sys.argv[2]
module, name = {'mpi': (devices, 'create_communicator'),
                'communicator': (stall_watchdog, 'start_watchdog'),
                'datasets': (image_data, 'load_datasets')}[stage]
original = getattr(module, name)


def stopping(*args, **kwargs):
    if int(os.environ['OMPI_COMM_WORLD_RANK']) == rank:
        os.kill(os.getpid(), signal.SIGSTOP)
    return original(*args, **kwargs)


setattr(module, name, stopping)
sys.argv = [SCRIPT] + sys.argv[3:]
runpy.run_path(SCRIPT, run_name='__main__')

"""train_imagenet.py whose rank RANK blocks in the kernel, in open() of a
FIFO that no process writes (as a read from a hung NFS or Lustre mount
blocks), at PHASE: ``update``, as it loads the images of its second
update, or ``validation``, as it loads its first validation batch. Before
it blocks it creates the file BLOCKED.

Usage: train_blocked.py RANK PHASE BLOCKED [train_imagenet arguments...]
"""
import os
import runpy
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

import image_data

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'train_imagenet.py')
rank, phase, blocked = int(sys.argv[1]), sys.argv[2], sys.argv[3]
transform = {'update': image_data.TrainTransform,
             'validation': image_data.ValTransform}[phase]
original = transform.__call__
calls = []


def blocking(self, *args, **kwargs):
    calls.append(None)
    if (int(os.environ.get('OMPI_COMM_WORLD_RANK', 0)) == rank and
            (phase == 'validation' or len(calls) > 4)):
        fifo = blocked + '.fifo'
        os.mkfifo(fifo)
        open(blocked, 'w').close()
        open(fifo).close()  # blocks: no writer ever comes
    return original(self, *args, **kwargs)


transform.__call__ = blocking
sys.argv = [SCRIPT] + sys.argv[4:]
runpy.run_path(SCRIPT, run_name='__main__')

"""train_imagenet.py whose rank RANK stops itself (SIGSTOP) as it starts to
read the datasets, before any training: a rank frozen while the job starts.

Usage: train_stopped_at_start.py RANK [train_imagenet arguments...]
"""
import os
import runpy
import signal
import sys

import chainer_compat  # NOQA: F401  (before chainer: NumPy 2, Python 3.12)

import image_data

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'train_imagenet.py')
rank = int(sys.argv[1])
load_datasets = image_data.load_datasets


def stopping_load_datasets(comm, *args, **kwargs):
    if comm.rank == rank:
        os.kill(os.getpid(), signal.SIGSTOP)
    return load_datasets(comm, *args, **kwargs)


image_data.load_datasets = stopping_load_datasets
sys.argv = [SCRIPT] + sys.argv[2:]
runpy.run_path(SCRIPT, run_name='__main__')

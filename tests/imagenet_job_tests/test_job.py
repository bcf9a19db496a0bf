"""imagenet_job.job: what the Job decides without MPI: which worker
writes, when snapshots are taken, what a stop signal ends with and how
much room --out needs."""
import argparse
import types

import chainer
import numpy
import pytest

from imagenet_job import endings
from imagenet_job import Job
from imagenet_job import signal_stop


class Trainer(object):
    """What the job reads of a Chainer trainer: its extensions and stop
    trigger."""

    def __init__(self, reached=False):
        self.extensions = []
        self.stop_trigger = types.SimpleNamespace(reached=reached)

    def extend(self, extension, **kwargs):
        self.extensions.append(extension)


def job_of(rank=0, **flags):
    """A Job of rank ``rank`` with ``flags`` set, without starting MPI."""
    job = Job.__new__(Job)
    job.args = argparse.Namespace(**dict(dict(
        out='result/run', test=False, snapshot_interval=1,
        snapshot_iterations=0, keep_snapshots=3, log_interval=10,
        tensorboard=False), **flags))
    job.comm = types.SimpleNamespace(rank=rank, size=2)
    job.writes = rank == 0
    job._stop = signal_stop.SignalStop.__new__(signal_stop.SignalStop)
    job._stop.signal_number, job._stop.iteration = 0, None
    return job


def test_only_rank_0_says_a_line(capsys):
    job_of(0).say('nodes: n1 ranks 0-1')
    job_of(1).say('nodes: n1 ranks 0-1')
    assert capsys.readouterr().out == 'nodes: n1 ranks 0-1\n'


@pytest.mark.parametrize('flags, expected', [
    ({}, [(3, 'epoch'), 'stop', (1, 'epoch')]),
    ({'test': True}, [(3, 'epoch'), 'stop']),
    ({'snapshot_iterations': 50},
     [(3, 'epoch'), 'stop', (1, 'epoch'), (50, 'iteration')]),
])
def test_snapshots_at_the_end_on_a_stop_and_at_the_intervals(flags,
                                                             expected):
    job = job_of(**flags)
    triggers = job.snapshot_triggers((3, 'epoch'))
    assert ['stop' if t == job._stop.requested else t
            for t in triggers] == expected


def test_only_rank_0_writes_snapshots_and_reports():
    trainer = Trainer()
    job_of(1).extend_writers(trainer, (3, 'epoch'), [], (1, 'epoch'))
    assert trainer.extensions == []


def test_a_stop_signal_ends_the_run_with_its_snapshot_named():
    job = job_of()
    job._stop.signal_number, job._stop.iteration = 15, 7  # SIGTERM
    with pytest.raises(endings.Stopped, match=(
            r'^stopped by SIGTERM after iteration 7; its snapshot is '
            r'result/run/snapshot_iter_7; continue with --resume auto$')):
        job._check_stopped(Trainer())
    job._check_stopped(Trainer(reached=True))  # the length came first


def test_the_room_needed_is_a_snapshot_and_the_model(monkeypatch):
    needed = []
    monkeypatch.setattr('imagenet_job.run_directory.check_free_space',
                        lambda out, n: needed.append(n))
    link = chainer.Link()
    with link.init_scope():
        link.w = chainer.Parameter(numpy.zeros(10, numpy.float32))
        link.h = chainer.Parameter(numpy.zeros(10, numpy.float16))
    job_of()._check_free_space(link)
    assert needed == [10 * 16 + 10 * 18]

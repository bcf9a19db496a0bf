"""Throughput: the total minibatch over the wall time between iterations."""
import chainer

from extensions import throughput
from extensions import Throughput


def test_reports_images_per_second_from_the_second_iteration(monkeypatch):
    clock = iter([100.0, 100.5, 102.5])
    monkeypatch.setattr(throughput.time, 'time', lambda: next(clock))
    extension = Throughput(total_batch_size=64)
    reports = []
    for _ in range(3):
        observation = {}
        with chainer.Reporter().scope(observation):
            extension(None)
        reports.append(observation)
    assert reports == [{}, {'images/s': 128.0}, {'images/s': 32.0}]


def test_runs_every_iteration_before_the_log_reads_it():
    assert Throughput(8).trigger == (1, 'iteration')
    assert Throughput.priority > chainer.training.PRIORITY_READER

"""A loader process that dies ends its worker with one line, instead of
leaving it waiting for the images for ever (image_data/loaders.py)."""
import os
import signal
import time

import pytest

from largebatch import errors
import image_data
from image_data import loaders
from image_data import validation


def square(context, task):
    return context * task * task


def test_the_pool_returns_each_task_s_result_in_order():
    pool = loaders.LoaderPool(2, square, 3)
    try:
        assert pool.submit(list(range(11))).get() == [
            3 * i * i for i in range(11)]
        assert pool.submit([]).get() == []
    finally:
        pool.close()


def test_a_pool_without_processes_loads_here_when_asked():
    loaded = []

    def record(context, task):
        loaded.append(task)
        return context + task

    pool = loaders.LoaderPool(0, record, 10)
    first, dropped = pool.submit([1, 2]), pool.submit([3])
    assert loaded == []
    assert first.get() == [11, 12] and loaded == [1, 2]
    del dropped
    assert pool.submit([]).get() == [] and loaded == [1, 2]
    pool.close()


class Killing(object):
    """A dataset whose item ``doomed`` kills the process that loads it, as
    the out-of-memory killer would."""

    def __init__(self, n, doomed):
        self.n, self.doomed = n, doomed

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index == self.doomed:
            os.kill(os.getpid(), signal.SIGKILL)
        return index


def index_transform(example, rng):
    return example


def test_a_dead_training_loader_ends_the_worker_with_one_line():
    it = image_data.GlobalOrderIterator(Killing(40, 7), 4, index_transform,
                                        seed=0, n_processes=2)
    start = time.monotonic()
    try:
        with pytest.raises(errors.LoaderDiedError) as e:
            for _ in range(10):  # an epoch holds the doomed image
                next(it)
    finally:
        it.finalize()
    assert time.monotonic() - start < 30
    assert str(e.value) == (
        'a loader process ended abruptly (killed, as the out-of-memory '
        'killer kills, or crashed); the images it was loading are lost')


def test_a_dead_validation_loader_ends_the_worker():
    it = validation.ValidationIterator(Killing(9, 5), 2, n_processes=1)
    try:
        assert next(it) == [0, 1]
        with pytest.raises(errors.LoaderDiedError):
            list(it)
    finally:
        it.finalize()


@pytest.mark.parametrize('n_processes', [0, 2])
def test_the_validation_iterator_passes_once_in_order_each_reset(
        n_processes):
    it = validation.ValidationIterator(list(range(7)), 3, n_processes)
    try:
        for _ in range(2):
            it.reset()
            assert list(it) == [[0, 1, 2], [3, 4, 5], [6]]
            assert it.is_new_epoch and it.epoch_detail == 1
        it.reset()
        assert next(it) == [0, 1, 2]  # a reset within a pass starts over
        it.reset()
        assert next(it) == [0, 1, 2] and it.epoch_detail == 3 / 7
    finally:
        it.finalize()
    empty = validation.ValidationIterator([], 3, n_processes)
    assert list(empty) == []
    empty.finalize()

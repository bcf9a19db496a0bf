"""HyperparameterSchedule: the value each update uses is the schedule at the
epoch before that update, and a resumed run continues exactly."""
import chainer
import chainer.links as L
from chainer import training
import numpy
import pytest

from extensions import HyperparameterSchedule

N_EXAMPLES, BATCH = 8, 2  # 4 iterations per epoch


def schedule(epoch):
    return 0.5 + epoch


class Recorder(training.Extension):
    """Records, after every update, the reported value and the epoch."""

    trigger = 1, 'iteration'
    priority = training.PRIORITY_READER

    def __init__(self):
        self.rows = []

    def __call__(self, trainer):
        self.rows.append((trainer.updater.iteration,
                          trainer.observation['lr']))


def make_trainer(out, stop, optimizer_arg=False):
    rng = numpy.random.RandomState(0)
    data = chainer.datasets.TupleDataset(
        rng.rand(N_EXAMPLES, 3).astype(numpy.float32),
        rng.randint(0, 2, N_EXAMPLES).astype(numpy.int32))
    optimizer = chainer.optimizers.MomentumSGD(lr=123.0)
    optimizer.setup(L.Classifier(L.Linear(3, 2)))
    iterator = chainer.iterators.SerialIterator(data, BATCH, shuffle=False)
    trainer = training.Trainer(
        training.StandardUpdater(iterator, optimizer), (stop, 'iteration'),
        out=str(out))
    trainer.extend(HyperparameterSchedule(
        'lr', schedule, optimizer if optimizer_arg else None))
    recorder = Recorder()
    trainer.extend(recorder)
    return trainer, optimizer, recorder


@pytest.mark.parametrize('optimizer_arg', [False, True])
def test_each_update_uses_the_schedule_at_its_epoch(tmp_path, optimizer_arg):
    trainer, optimizer, recorder = make_trainer(tmp_path, 6, optimizer_arg)
    trainer.run()
    expected = [(i, schedule((i - 1) / 4)) for i in range(1, 7)]
    assert recorder.rows == expected
    assert optimizer.lr == schedule(6 / 4)  # set for the next update


def test_the_first_value_is_set_when_training_starts(tmp_path):
    trainer, optimizer, _ = make_trainer(tmp_path, 1)
    assert optimizer.lr == 123.0
    trainer.get_extension('lr_schedule').initialize(trainer)
    assert optimizer.lr == schedule(0)


def test_a_resumed_run_continues_exactly(tmp_path):
    whole, _, uninterrupted = make_trainer(tmp_path / 'a', 7)
    whole.run()
    first, _, _ = make_trainer(tmp_path / 'b', 3)
    first.run()
    path = str(tmp_path / 'snapshot.npz')
    chainer.serializers.save_npz(path, first)
    resumed, optimizer, recorder = make_trainer(tmp_path / 'c', 7)
    chainer.serializers.load_npz(path, resumed)
    resumed.run()
    assert recorder.rows == uninterrupted.rows[3:]
    assert optimizer.lr == schedule(7 / 4)

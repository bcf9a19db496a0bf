"""AnyOfTriggers: fires when any trigger fires, keeps them in step, and
resumes with them."""
import chainer
import chainer.links as L
from chainer import training
import numpy

from extensions import AnyOfTriggers


class Firings(training.Extension):

    priority = training.PRIORITY_READER

    def __init__(self):
        self.iterations = []

    def __call__(self, trainer):
        self.iterations.append(trainer.updater.iteration)


def make_trainer(out, stop, n_examples=8, batch=2):
    rng = numpy.random.RandomState(0)
    data = chainer.datasets.TupleDataset(
        rng.rand(n_examples, 3).astype(numpy.float32),
        rng.randint(0, 2, n_examples).astype(numpy.int32))
    optimizer = chainer.optimizers.SGD()
    optimizer.setup(L.Classifier(L.Linear(3, 2)))
    iterator = chainer.iterators.SerialIterator(data, batch, shuffle=False)
    return training.Trainer(training.StandardUpdater(iterator, optimizer),
                            (stop, 'iteration'), out=str(out))


def test_fires_when_any_trigger_fires(tmp_path):
    trainer = make_trainer(tmp_path, 12)  # 4 iterations per epoch
    firings = Firings()
    trainer.extend(firings, trigger=AnyOfTriggers(
        [(5, 'iteration'), (1, 'epoch')]))
    trainer.run()
    assert firings.iterations == [4, 5, 8, 10, 12]


def test_a_trigger_shared_with_another_extension_is_not_disturbed(tmp_path):
    trainer = make_trainer(tmp_path, 9)
    shared = training.triggers.IntervalTrigger(3, 'iteration')
    alone, combined = Firings(), Firings()
    trainer.extend(alone, name='alone', trigger=shared)
    trainer.extend(combined, name='combined', trigger=AnyOfTriggers(
        [shared, (4, 'iteration')]))
    trainer.run()
    assert alone.iterations == [3, 6, 9]
    assert combined.iterations == [3, 4, 6, 8, 9]


def test_resumes_with_its_triggers(tmp_path):
    """A snapshot taken mid-epoch: the epoch trigger fires at the epoch's
    end after the resume, as it would have without the interruption."""
    def run(stop, snapshot=None, out='a'):
        trainer = make_trainer(tmp_path / out, stop, n_examples=10, batch=4)
        firings = Firings()
        trainer.extend(firings, name='firings', trigger=AnyOfTriggers(
            [(1, 'epoch'), (7, 'iteration')]))
        if snapshot:
            chainer.serializers.load_npz(snapshot, trainer)
        trainer.run()
        return trainer, firings.iterations
    _, whole = run(12)
    first, _ = run(4, out='b')
    path = str(tmp_path / 'snapshot.npz')
    chainer.serializers.save_npz(path, first)
    _, rest = run(12, path, out='c')
    assert rest == [i for i in whole if i > 4]

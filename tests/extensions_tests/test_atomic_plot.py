"""A plot is written whole or not at all: a full disk while saving it
leaves neither a torn PNG nor its temporary file."""
import errno
import os

import chainer
import matplotlib.figure
import pytest
from chainer import training

from extensions import reports


def trainer_with_plot(tmp_path):
    model = chainer.links.Linear(2, 1)
    optimizer = chainer.optimizers.SGD()
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator([(1.0,)] * 4, 2)
    updater = training.updaters.StandardUpdater(
        iterator, optimizer, loss_func=lambda x: chainer.functions.sum(
            model(x.reshape(-1, 1).repeat(2, axis=1).astype('f'))))
    trainer = training.Trainer(updater, (2, 'iteration'), out=str(tmp_path))
    plot = reports._AtomicPlot(['main/loss'], 'iteration',
                               trigger=(1, 'iteration'), filename='loss.png')
    return trainer, plot


def test_the_plot_lands_under_its_name(tmp_path):
    trainer, plot = trainer_with_plot(tmp_path)
    trainer.updater.update()
    trainer.observation = {'main/loss': 1.0}
    plot(trainer)
    assert os.listdir(str(tmp_path)) == ['loss.png']


def test_a_full_disk_leaves_no_torn_plot(tmp_path, monkeypatch):
    trainer, plot = trainer_with_plot(tmp_path)
    (tmp_path / 'loss.png').write_bytes(b'the previous plot')

    def full(figure, path, **kwargs):
        with open(path, 'wb') as f:
            f.write(b'\x89PNG torn')
        raise OSError(errno.ENOSPC, 'No space left on device', path)
    monkeypatch.setattr(matplotlib.figure.Figure, 'savefig', full)
    trainer.updater.update()
    trainer.observation = {'main/loss': 1.0}
    with pytest.raises(OSError):
        plot(trainer)
    assert os.listdir(str(tmp_path)) == ['loss.png']
    assert (tmp_path / 'loss.png').read_bytes() == b'the previous plot'

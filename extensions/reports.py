"""The log, the printed table and the plots of a training run (rank 0)."""
import sys

from chainer.training import extensions as chainer_extensions

from extensions.triggers import AnyOfTriggers

LOSS = ['main/loss', 'validation/main/loss']
ACCURACY = ['main/accuracy', 'validation/main/accuracy',
            'validation/main/top5']


def add_reports(trainer, scheduled, triggers):
    """``LogReport``, ``PrintReport`` and one ``PlotReport`` per figure.

    They report whenever any of ``triggers`` fires (e.g. every N iterations
    and at every validation, so that the last validation is logged too);
    ``scheduled`` are the keys of the scheduled hyperparameters, printed
    and plotted one figure each. A progress bar is added on a terminal.
    """
    def trigger():  # a new one per extension: triggers keep state
        return AnyOfTriggers(triggers)
    trainer.extend(chainer_extensions.LogReport(trigger=trigger()))
    trainer.extend(chainer_extensions.PrintReport(
        ['epoch', 'iteration'] + LOSS + ACCURACY + scheduled
        + ['images/s', 'elapsed_time']), trigger=trigger())
    for name, keys in [('loss', LOSS), ('accuracy', ACCURACY)] + [
            (key, [key]) for key in scheduled]:
        trainer.extend(chainer_extensions.PlotReport(
            keys, 'epoch', trigger=trigger(), filename=name + '.png'))
    if sys.stdout.isatty():
        trainer.extend(chainer_extensions.ProgressBar())

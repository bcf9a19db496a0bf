"""The log, the printed table and the plots of a run.

All of them are rank 0's. Under ``mpiexec`` every rank's standard output is
a pseudo-terminal of the launcher even when the job's output goes to a file,
so whether a person watches is read from the launcher's own standard output:
the progress bar and the terminal escapes of the table appear only there.
"""
import os
import sys

from chainer.training import extensions as chainer_extensions

from extensions.triggers import AnyOfTriggers
from largebatch import launchers
from largebatch import outputs

LOSS = ['main/loss', 'validation/main/loss']
ACCURACY = ['main/accuracy', 'validation/main/accuracy',
            'validation/main/top5']
_ERASE = '\033[J'


def add_reports(trainer, scheduled, triggers, watched=None):
    """``LogReport``, ``PrintReport`` and one ``PlotReport`` per figure.

    They report whenever any of ``triggers`` fires (e.g. every N iterations
    and at every validation, so that the last validation is logged too);
    ``scheduled`` are the keys of the scheduled hyperparameters, printed
    and plotted one figure each. A progress bar, updated every iteration, is
    added where a person watches (``watched``, default :func:`is_watched`).
    """
    def trigger():  # a new one per extension: triggers keep state
        return AnyOfTriggers(triggers)
    watched = is_watched() if watched is None else watched
    trainer.extend(chainer_extensions.LogReport(trigger=trigger()))
    trainer.extend(_Table(
        ['epoch', 'iteration'] + LOSS + ACCURACY + scheduled
        + ['images/s', 'elapsed_time'],
        out=sys.stdout if watched else _WithoutEscapes(sys.stdout)),
        trigger=trigger())
    for name, keys in [('loss', LOSS), ('accuracy', ACCURACY)] + [
            (key, [key]) for key in scheduled]:
        trainer.extend(_AtomicPlot(
            keys, 'iteration', trigger=trigger(), filename=name + '.png',
            marker='.'))
    if watched:
        trainer.extend(_ProgressBar(update_interval=1))


def is_watched():
    """Whether standard output reaches a terminal: this process's, or under
    an MPI launcher (its stdout is then always a pseudo-terminal), the
    launcher's."""
    if not sys.stdout.isatty():
        return False
    if not launchers.launched():
        return True
    try:
        target = os.readlink('/proc/{}/fd/1'.format(os.getppid()))
    except OSError:
        return False
    return target.startswith(('/dev/pts/', '/dev/tty'))


class _AtomicPlot(chainer_extensions.PlotReport):
    """Chainer's ``PlotReport`` writing its PNG to a temporary file that is
    renamed over its name (:func:`largebatch.outputs.replacing`), so that a
    full disk leaves no torn figure under its name."""

    default_name = 'PlotReport'  # the key of its data in snapshots

    def __call__(self, trainer):
        final = self._file_name
        with outputs.replacing(os.path.join(trainer.out, final), force=True,
                               suffix='.png') as tmp:
            self._file_name = os.path.basename(tmp)
            try:
                super(_AtomicPlot, self).__call__(trainer)
            finally:
                self._file_name = final


class _ProgressBar(chainer_extensions.ProgressBar):
    """Chainer's progress bar, its rate timed from the start of this
    process's training: Chainer's own has a single time stamp at its first
    update and prints ``inf iters/sec`` there."""

    def initialize(self, trainer):
        self._pbar.update_speed(trainer.updater.iteration,
                                trainer.updater.epoch_detail)


class _Table(chainer_extensions.PrintReport):
    """``PrintReport`` that prints only the rows logged in this run: a
    resumed run does not print the rows of its snapshot's log again."""

    def initialize(self, trainer):
        self._log_len = len(trainer.get_extension('LogReport').log)


class _WithoutEscapes(object):
    """A stream that drops ``PrintReport``'s erase-line escapes."""

    def __init__(self, out):
        self.out = out

    def write(self, text):
        if text != _ERASE:
            self.out.write(text)

    def flush(self):
        self.out.flush()

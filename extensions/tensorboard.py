"""The log's scalars as TensorBoard events (``--tensorboard``).

Horovod's and Lightning's examples write TensorBoard events; Chainer's
reports go to ``OUT/log`` only. This extension writes every numeric value
of each new ``LogReport`` entry as a scalar at its iteration into
``OUT/tensorboard`` with ``tensorboardX`` (the ``tensorboard`` extra). A
resumed run's writer purges the steps after the snapshot it resumed from,
so TensorBoard draws the run as one, across requeues.
"""
from chainer import training


class TensorBoardReport(training.Extension):
    """Register it on rank 0 after the ``LogReport``, with its trigger."""

    priority = training.PRIORITY_READER  # reads the LogReport's new entry

    def __init__(self, logdir):
        self.logdir = logdir
        self.writer = None
        self.written = 0

    def initialize(self, trainer):
        from tensorboardX import SummaryWriter
        iteration = trainer.updater.iteration
        self.writer = SummaryWriter(self.logdir, purge_step=iteration + 1
                                    if iteration else None)
        self.written = len(trainer.get_extension('LogReport').log)

    def __call__(self, trainer):
        log = trainer.get_extension('LogReport').log
        for entry in log[self.written:]:
            for key, value in sorted(entry.items()):
                if key not in ('epoch', 'iteration') and isinstance(
                        value, (int, float)):
                    self.writer.add_scalar(key, value, entry['iteration'])
        self.written = len(log)
        self.writer.flush()

    def finalize(self):
        if self.writer is not None:
            self.writer.close()

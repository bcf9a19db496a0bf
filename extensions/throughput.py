"""Training throughput in images per second over all workers."""
import time

from chainer import reporter
from chainer.training import extension


class Throughput(extension.Extension):
    """Reports ``images/s``: total minibatch x iterations / wall time since
    the previous iteration, averaged by LogReport over its interval."""

    trigger = 1, 'iteration'
    priority = extension.PRIORITY_WRITER

    def __init__(self, total_batch_size):
        self.total_batch_size = total_batch_size
        self._last = None

    def __call__(self, trainer):
        now = time.time()
        if self._last is not None:
            reporter.report(
                {'images/s': self.total_batch_size / (now - self._last)})
        self._last = now

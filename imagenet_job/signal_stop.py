"""Stopping a job on SIGTERM, SIGUSR1 or SIGINT after the update in progress.

Schedulers send SIGTERM on preemption, ``scancel`` or a time limit (Slurm
sends SIGUSR1 ahead of it with ``--signal``), Open MPI's ``mpiexec``
forwards SIGUSR1 to every process, and Ctrl-C at a terminal sends SIGINT to
a process started there. Any worker that receives one only sets a flag (a
second one, 2 s or more later, ends it at once, unless the workers have
agreed to stop already: then the snapshot is on its way, and the job ends
with it, whatever signals follow); the update in progress finishes, and
right after it every worker all-reduces its flag, so all of them agree in
the same iteration that the job stops. The trainer's stop trigger then
fires, the snapshot and BN-statistics triggers fire with it (one snapshot of
that iteration, written atomically), and the trainer returns; the script
ends with :data:`largebatch.errors.STOPPED_STATUS`.
"""
import contextlib
import os
import signal
import time

from chainer import training

#: The signals that stop a job after the update in progress.
SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)


@contextlib.contextmanager
def ignoring(signals=SIGNALS):
    """Ignore ``signals`` inside; processes started inside keep ignoring
    them. A launcher signals a worker's whole process group: the helpers
    that multiprocessing starts (its resource tracker, the loaders'
    forkserver) must outlive the signal, the worker decides when to stop."""
    previous = {number: signal.signal(number, signal.SIG_IGN)
                for number in signals}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class SignalStop(training.Extension):
    """Agrees once per iteration on whether a worker received a stop signal.

    Register it on every worker (it makes one all-reduce of one integer per
    iteration, which all workers must enter together). Its priority is the
    highest, so within an iteration it runs before every trigger that reads
    it: :meth:`stop_trigger` wraps the trainer's stop trigger and
    :attr:`requested` is a trigger that fires in the stopping iteration (add
    it to the snapshot triggers).

    Attributes:
        signal_number (int): the signal that stopped the job (the largest
            number received by any worker), 0 while none did.
        received_at (float): when this worker received its first stop
            signal (``time.monotonic()``), None while it received none; the
            stall watchdog ends a worker that does not stop soon after.
        iteration (int): the iteration after which the job stopped.
    """

    trigger = 1, 'iteration'
    priority = training.PRIORITY_WRITER + 10

    def __init__(self, comm, signals=SIGNALS):
        self.comm = comm
        self.received = 0
        self.received_at = None
        self.signal_number = 0
        self.iteration = None
        for number in signals:
            signal.signal(number, self._receive)

    def _receive(self, number, frame):
        if self.signal_number:  # stopping already: the snapshot comes first
            return
        # A second signal, not the same one delivered twice (by the
        # scheduler and by mpiexec): the default action, at once.
        if self.received and time.monotonic() - self.received_at > 2:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
        if not self.received:
            self.received_at = time.monotonic()
        self.received = max(self.received, int(number))

    def __call__(self, trainer):
        if self.signal_number:
            return
        from mpi4py import MPI  # imported late: MPI starts after the loaders
        agreed = self.comm.mpi_comm.allreduce(self.received, op=MPI.MAX)
        if agreed:
            self.signal_number = agreed
            self.iteration = trainer.updater.iteration

    @property
    def signal_name(self):
        return signal.Signals(self.signal_number).name

    def requested(self, trainer):
        """A trigger: fires in the iteration after which the job stops."""
        return bool(self.signal_number)

    def __deepcopy__(self, memo):
        return self  # triggers are copied (AnyOfTriggers); the flag is one

    def stop_trigger(self, trigger):
        """The trainer's stop ``trigger`` that also fires on a stop signal."""
        return _StopTrigger(training.get_trigger(trigger), self)


class _StopTrigger(object):
    """``trigger``, or a stop signal agreed on; saved as ``trigger`` alone."""

    def __init__(self, trigger, stop):
        self.trigger = trigger
        self.stop = stop
        self.reached = False  # whether ``trigger`` itself fired

    def __call__(self, trainer):
        self.reached = self.trigger(trainer)
        return self.reached or bool(self.stop.signal_number)

    def get_training_length(self):
        return self.trigger.get_training_length()

    def serialize(self, serializer):
        self.trigger.serialize(serializer)

"""A stalled worker ends the job: progress marks, heartbeats and a watchdog.

A worker that is stopped (SIGSTOP, a frozen node), hung (a GPU that no
longer returns) or blocked in a read that does not return (a FIFO among the
images, a hung NFS or Lustre mount) leaves the others waiting in the next
collective for ever, and on a thousand GPUs it burns the whole allocation.
ChainerMN has no check for it; PyTorch's NCCL watchdog and Horovod's stall
check end such jobs. Here each worker marks its progress (:meth:`StallWatchdog.
mark`: each phase of the run it enters, each update and each validation
batch), its thread sends rank 0 the mark's age every ``period`` seconds, and
rank 0 ends the job with one line when the ranks furthest behind have made
no progress for ``timeout`` seconds (a run's first update, which compiles
kernels, gets twice as long), or sent nothing for as long. A job of one
process watches itself. A worker that received a stop signal and makes no
progress for :data:`STOP_GRACE` seconds ends the job too: its stop would
never come. Before the watch, :func:`start_deadline` times the job's start.
The whole story is in docs/reliability.md.
"""
import contextlib
import os
import socket
import sys
import threading
import time

import numpy
from chainer import training

import communicators
from imagenet_job.agreement import JobInputError
from largebatch.errors import InputError
from largebatch.errors import STALLED_STATUS
from largebatch import launchers

_HEARTBEAT, _ANSWER = 71, 72


@contextlib.contextmanager
def start_deadline(timeout, grace=20.0, exit=os._exit):
    """The block (the job's start up to :meth:`StallWatchdog.start`) ends
    within ``timeout`` seconds (0: no limit), or this worker prints one line
    and ``exit(STALLED_STATUS)``: its launcher then ends the others, which
    may be waiting in MPI's own start-up, where nothing else could end
    them. Rank 0 (as its launcher numbers it) goes first, the others
    ``grace`` seconds after it, so that the job ends with one line."""
    if timeout <= 0:
        yield
        return
    rank = launchers.rank()
    delay = timeout + (grace if rank else 0.)
    timer = threading.Timer(delay, _start_overdue, (
        rank, timeout, time.monotonic() + delay, grace, exit))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _start_overdue(rank, timeout, due, grace, exit):
    """Say so and end; silently where this worker wakes half the ``grace``
    or more past its deadline: it was the one stopped (rank 0, woken as its
    launcher ends the job), and another has said so."""
    if time.monotonic() - due < grace / 2:
        _say(ending_line(timeout, 'the job\'s start (MPI, the communicator) '
                         'has not ended on rank {} on {}; a worker is stopped '
                         'there or its node is gone'.format(
                             rank, socket.gethostname())))
    exit(STALLED_STATUS)


#: Seconds a worker that received a stop signal may go without progress
#: before it ends the job (Slurm's default between SIGTERM and SIGKILL).
STOP_GRACE = 30.

#: The phases of a worker's run, in the order of one iteration.
INPUTS, SETUP, BETWEEN, UPDATE, END = range(5)
PHASES = ('reading its inputs (the datasets, --mean, the snapshot)',
          'setting up the trainer (the model, the resume)',
          'between updates (validation, snapshots, reports)', 'update',
          'writing model.npz')


class StallWatchdog(object):
    """The watchdog of one worker: :meth:`start` it, :meth:`mark` its
    progress (its :meth:`extensions` mark the updates), :meth:`finish` it
    at the end.

    Args:
        mpi_comm: the job's mpi4py communicator (None: a job of one
            process, which watches itself and calls no MPI).
        hosts: the host of every rank, in rank order.
        timeout (float): seconds without progress that end the job.
        stop: the job's :class:`imagenet_job.signal_stop.SignalStop`, whose
            ``received_at`` says when a stop signal came (or None).
        period (float): seconds between heartbeats.
        grace (float): extra seconds a worker waits for rank 0's verdict.
        abort (callable): ``abort(status)`` ends the whole job.
    """

    def __init__(self, mpi_comm, hosts, timeout, stop=None, period=5.0,
                 grace=20.0, abort=None):
        self.comm = mpi_comm.Dup() if mpi_comm is not None else None
        self.hosts = hosts
        self.timeout = timeout
        self.stop = stop
        self.period = min(period, timeout / 4.)
        self.grace = grace
        self.abort = abort or (self.comm.Abort if self.comm is not None
                               else os._exit)
        # (completed updates, phase, steps in it, when) as one value, which
        # the thread reads while the worker replaces it
        self._mark = (0, INPUTS, 0, time.monotonic())
        self.first_update = True
        self.finished = False
        self._stop = threading.Event()
        self._thread = None

    # The job's side: where the worker is, and the end
    def mark(self, phase=None, completed=None):
        """Progress: one more step of the current phase, or the start of
        ``phase`` (with ``completed`` updates, where they changed)."""
        done, current, steps, _ = self._mark
        if phase is None:
            self._mark = (done, current, steps + 1, time.monotonic())
        else:
            self._mark = (done if completed is None else completed, phase, 0,
                          time.monotonic())

    def extensions(self):
        """Two trainer extensions: the first runs before every other one of
        an iteration (the update has ended), the last after all of them
        (the next update starts); the first update starts with the
        trainer."""
        watchdog = self

        @training.make_extension(trigger=(1, 'iteration'),
                                 priority=training.PRIORITY_WRITER + 100)
        def update_ended(trainer):
            watchdog.first_update = False
            watchdog.mark(BETWEEN, trainer.updater.iteration)

        def first_update_starts(trainer):
            watchdog.mark(UPDATE, trainer.updater.iteration)

        @training.make_extension(trigger=(1, 'iteration'), priority=-100,
                                 initializer=first_update_starts)
        def update_starts(trainer):
            watchdog.mark(UPDATE)
        return update_ended, update_starts

    def start(self):
        """Begin watching."""
        self._thread = threading.Thread(
            target=self._watch_alone if self.comm is None
            else self._watch_as_root if self.comm.rank == 0
            else self._watch_as_worker, daemon=True)
        self._thread.start()

    def finish(self):
        """This worker has ended: its last heartbeat (rank 0: answer) says
        so, and the watch ends."""
        self.finished = True
        self._stop.set()
        self._thread.join()

    def state(self, now=None):
        """``[completed updates, phase, steps in it, seconds since the last
        mark, 1 if in the run's first update, 1 if the worker has ended,
        seconds since the latter of a stop signal and the last mark, or -1
        without a signal]``."""
        now = time.monotonic() if now is None else now
        done, phase, steps, when = self._mark
        received = getattr(self.stop, 'received_at', None)
        return numpy.array([
            done, phase, steps, now - when,
            float(self.first_update and phase == UPDATE),
            float(self.finished),
            -1. if received is None else now - max(received, when)])

    # The threads
    def _watch_alone(self):
        while not self._stop.wait(self.period):
            line = self._verdict([time.monotonic()], [self.state()])
            if line:
                self._end(line)

    def _watch_as_root(self):
        size = self.comm.size
        heard = [time.monotonic()] * size
        states = [None] * size
        buffer = numpy.empty(7)
        pending = []
        while True:
            stopping = self._stop.wait(self.period)
            while self.comm.Iprobe(tag=_HEARTBEAT):
                status = _status()
                self.comm.Recv(buffer, source=_any_source(), tag=_HEARTBEAT,
                               status=status)
                heard[status.Get_source()] = time.monotonic()
                states[status.Get_source()] = buffer.copy()
            states[0], heard[0] = self.state(), time.monotonic()
            pending = [r for r in pending if not r.Test()]
            for rank in range(1, size):
                pending.append(self.comm.Isend(
                    numpy.array([float(self.finished)]), dest=rank,
                    tag=_ANSWER))
            if stopping:
                return
            line = self._verdict(heard, states)
            if line:
                self._end(line)

    def _verdict(self, heard, states):
        """The line that ends the job, or None."""
        now = time.monotonic()
        stalled = stalled_ranks(heard, states, now, self.timeout)
        if stalled:
            return describe(stalled, self.hosts, self.timeout)
        stopped = unstoppable_ranks(states, STOP_GRACE)
        if stopped:
            return describe(stopped, self.hosts, self.timeout, STOP_GRACE)
        return None

    def _watch_as_worker(self):
        heard = time.monotonic()
        answer = numpy.empty(1)
        root_finished = False
        pending = []
        while True:
            stopping = self._stop.wait(self.period)
            pending = [r for r in pending if not r.Test()]
            pending.append(self.comm.Isend(self.state(), dest=0,
                                           tag=_HEARTBEAT))
            if stopping:
                return
            while self.comm.Iprobe(source=0, tag=_ANSWER):
                self.comm.Recv(answer, source=0, tag=_ANSWER)
                heard, root_finished = time.monotonic(), bool(answer[0])
            silent = time.monotonic() - heard
            if silent > self.timeout + self.grace and not root_finished:
                self._end(describe([(0, 'sent nothing for {:.0f} s'.format(
                    silent))], self.hosts, self.timeout))

    def _end(self, line):
        _say(line)
        self.abort(STALLED_STATUS)


def start_watchdog(comm, timeout, stop=None):
    """This worker's stall watchdog, watching from now on (its phase:
    reading its inputs); None for a ``timeout`` of 0. In a job of several
    processes its thread calls MPI beside the training's: an MPI started
    below ``MPI_THREAD_MULTIPLE`` (the same library on every worker) ends
    the job as bad input every worker found."""
    if timeout <= 0:
        return None
    if comm.size == 1:
        watchdog = StallWatchdog(None, [socket.gethostname()], timeout, stop)
        watchdog.start()
        return watchdog
    try:
        communicators.check_thread_level(communicators.start_mpi(),
                                         'the stall watchdog')
    except InputError as e:
        raise JobInputError('--stall-timeout {:g}: {}, or pass '
                            '--stall-timeout 0 to train without the '
                            'watchdog'.format(timeout, e)) from None
    watchdog = StallWatchdog(comm.mpi_comm, comm.mpi_comm.allgather(
        socket.gethostname()), timeout, stop)
    watchdog.start()
    return watchdog


def _status():
    from mpi4py import MPI
    return MPI.Status()


def _any_source():
    from mpi4py import MPI
    return MPI.ANY_SOURCE


def stalled_ranks(heard, states, now, timeout):
    """``(rank, what)`` of the stalled ranks: those silent for ``timeout``
    seconds that have not ended (the others then wait for them), else,
    among the ranks furthest behind (fewest updates, earliest phase, fewest
    steps in it; the others wait for them in a collective), those without
    progress for ``timeout`` seconds (twice that in the run's first
    update). ``heard[r]``: when rank r was last heard; ``states[r]``:
    :meth:`StallWatchdog.state` as it last sent it, or None."""
    silent = [(rank, 'sent nothing for {:.0f} s'.format(now - when))
              for rank, when in enumerate(heard) if now - when > timeout
              and not (states[rank] is not None and states[rank][5])]
    if silent:
        return silent
    working = [(rank, state) for rank, state in enumerate(states)
               if state is not None and not state[5]]
    if not working:
        return []
    behind = min(tuple(state[:3]) for _, state in working)
    return [(rank, 'has made no progress for {:.0f} s in {}'.format(
        state[3], where(state))) for rank, state in working
        if tuple(state[:3]) == behind
        and state[3] > timeout * (2 if state[4] else 1)]


def unstoppable_ranks(states, grace):
    """``(rank, what)`` of the ranks that received a stop signal and have
    made no progress for ``grace`` seconds since."""
    return [(rank, 'received a stop signal and has made no progress for '
             '{:.0f} s since, in {}'.format(state[6], where(state)))
            for rank, state in enumerate(states) if state is not None
            and not state[5] and state[6] > grace]


def where(state):
    """The phase of a worker's ``state``, in words."""
    done, phase = int(state[0]), int(state[1])
    if phase == UPDATE:
        return 'update {}'.format(done + 1)
    if phase == BETWEEN:
        return 'the extensions after update {} (validation, snapshots, ' \
            'reports)'.format(done)
    return PHASES[phase]


def describe(stalled, hosts, timeout, grace=None):
    """The one line that ends the job (``grace``: a stop's)."""
    return ending_line(timeout, '; '.join(
        'rank {} on {} {}'.format(rank, hosts[rank], what)
        for rank, what in stalled), grace)


def ending_line(timeout, what, grace=None):
    """A stall's line, ``what`` said of the ranks; with ``grace``, that of a
    stop that does not come."""
    return 'no progress within {}: {}; ending the job (exit {})'.format(
        '--stall-timeout {:g} s'.format(timeout) if grace is None else
        '{:g} s of a stop signal'.format(grace), what, STALLED_STATUS)


def _say(line):
    print('{}: error: {}'.format(os.path.basename(sys.argv[0]), line),
          file=sys.stderr, flush=True)

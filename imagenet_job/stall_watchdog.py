"""A stalled worker ends the job: heartbeats and a watchdog on rank 0.

A worker that is stopped (SIGSTOP, a frozen node) or hung (a GPU that no
longer returns) leaves the others waiting in the next all-reduce for ever,
and on a thousand GPUs it burns the whole allocation. ChainerMN has no
check for it; PyTorch's NCCL watchdog and Horovod's stall check end such
jobs. Here every worker's thread sends rank 0, every ``period`` seconds, the
number of updates it has completed and how long its current update has run
(none outside an update: validation, snapshots and the other extensions
run between updates), and rank 0's thread answers each. The watch lasts
the whole job, from just after the communicator is made (the datasets'
read, the resume, the initial broadcast) to each worker's end, when it
sends its last heartbeat. Rank 0 ends the job with one line naming the
ranks and hosts, and exit status :data:`errors.STALLED_STATUS`, when a
worker

- sent nothing for ``timeout`` seconds and has not ended (stopped, or its
  node gone): the line names the silent ranks, or
- has been in one update for ``timeout`` seconds while none is silent (a
  hung GPU keeps every rank in the update): the line names them; the
  first update of a run (kernel compilation, cuDNN's autotuning) is exempt.

A worker that hears nothing from rank 0 for ``timeout`` plus ``grace``
seconds, before rank 0 has ended, ends the job naming rank 0. The messages
travel on a duplicate of the job's communicator from the threads (mpi4py
asks MPI for ``MPI_THREAD_MULTIPLE``), so they never match the training's
own traffic.

Before the watch starts, MPI's start-up and the creation of the
communicators (NCCL's included) and of the watchdog are collective: a
worker stopped there leaves the others waiting in them, and no heartbeat
runs yet. :func:`start_deadline` gives that start ``timeout`` seconds on
each worker's own clock: rank 0 then ends the job with one line, the others
``grace`` seconds later (when rank 0 is the one stopped).
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


class StallWatchdog(object):
    """The watchdog of one worker: :meth:`start` it, add its
    :meth:`extensions` to the trainer, :meth:`finish` it at the end.

    Args:
        mpi_comm: the job's mpi4py communicator.
        hosts: the host of every rank, in rank order.
        timeout (float): seconds without progress that end the job.
        period (float): seconds between heartbeats.
        grace (float): extra seconds a worker waits for rank 0's verdict.
        abort (callable): ``abort(status)`` ends the whole job.
    """

    def __init__(self, mpi_comm, hosts, timeout, period=5.0, grace=20.0,
                 abort=None):
        self.comm = mpi_comm.Dup()
        self.hosts = hosts
        self.timeout = timeout
        self.period = min(period, timeout / 4.)
        self.grace = grace
        self.abort = abort or self.comm.Abort
        self.completed = 0
        self.update_started = None
        self.first_update = True
        self.finished = False
        self._stop = threading.Event()
        self._thread = None

    # The job's side: where updates start and end, and the end
    def extensions(self):
        """Two trainer extensions: the first runs before every other one of
        an iteration (the update has ended), the last after all of them
        (the next update starts); the first update starts with the
        trainer."""
        watchdog = self

        @training.make_extension(trigger=(1, 'iteration'),
                                 priority=training.PRIORITY_WRITER + 100)
        def update_ended(trainer):
            watchdog.completed = trainer.updater.iteration
            watchdog.update_started = None
            watchdog.first_update = False

        def first_update_starts(trainer):
            watchdog.completed = trainer.updater.iteration
            watchdog.update_started = time.monotonic()

        @training.make_extension(trigger=(1, 'iteration'), priority=-100,
                                 initializer=first_update_starts)
        def update_starts(trainer):
            watchdog.update_started = time.monotonic()
        return update_ended, update_starts

    def start(self):
        """Begin watching, outside any update."""
        self._thread = threading.Thread(
            target=self._watch_as_root if self.comm.rank == 0
            else self._watch_as_worker, daemon=True)
        self._thread.start()

    def finish(self):
        """This worker has ended: its last heartbeat (rank 0: answer) says
        so, and the watch ends."""
        self.update_started = None
        self.finished = True
        self._stop.set()
        self._thread.join()

    def state(self):
        """``[completed updates, seconds in the current update or -1, 1 if
        it is the run's first update, 1 if the worker has ended]``."""
        started = self.update_started
        return numpy.array([
            self.completed, -1. if started is None
            else time.monotonic() - started, float(self.first_update),
            float(self.finished)])

    # The threads
    def _watch_as_root(self):
        size = self.comm.size
        heard = [time.monotonic()] * size
        states = [None] * size
        buffer = numpy.empty(4)
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
            stalled = stalled_ranks(heard, states, time.monotonic(),
                                    self.timeout)
            if stalled:
                self._end(describe(stalled, self.hosts, self.timeout))

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


def start_watchdog(comm, timeout):
    """This worker's stall watchdog, watching from now on; None for a job of
    one process or a ``timeout`` of 0. Its thread calls MPI beside the
    training's: an MPI started below ``MPI_THREAD_MULTIPLE`` (the same
    library on every worker) ends the job as bad input every worker
    found."""
    if comm.size == 1 or timeout <= 0:
        return None
    try:
        communicators.check_thread_level(communicators.start_mpi(),
                                         'the stall watchdog')
    except InputError as e:
        raise JobInputError('--stall-timeout {:g}: {}, or pass '
                            '--stall-timeout 0 to train without the '
                            'watchdog'.format(timeout, e)) from None
    watchdog = StallWatchdog(comm.mpi_comm, comm.mpi_comm.allgather(
        socket.gethostname()), timeout)
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
    seconds that have not ended (the others then wait for them), else those
    in one update (not their run's first) for as long. ``heard[r]``: when
    rank r was last heard; ``states[r]``: :meth:`StallWatchdog.state` as it
    last sent it, or None."""
    silent = [(rank, 'sent nothing for {:.0f} s'.format(now - when))
              for rank, when in enumerate(heard) if now - when > timeout
              and not (states[rank] is not None and states[rank][3])]
    if silent:
        return silent
    return [(rank, 'has been in update {} for {:.0f} s'.format(
        int(state[0]) + 1, state[1])) for rank, state in enumerate(states)
        if state is not None and state[1] > timeout and not state[2]]


def describe(stalled, hosts, timeout):
    """The one line that ends the job."""
    return ending_line(timeout, '; '.join(
        'rank {} on {} {}'.format(rank, hosts[rank], what)
        for rank, what in stalled))


def ending_line(timeout, what):
    """A stall's line, ``what`` said of the ranks."""
    return 'no progress within --stall-timeout {:g} s: {}; ending the job ' \
        '(exit {})'.format(timeout, what, STALLED_STATUS)


def _say(line):
    print('{}: error: {}'.format(os.path.basename(sys.argv[0]), line),
          file=sys.stderr, flush=True)

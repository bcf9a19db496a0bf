"""Loader processes whose death ends the worker instead of hanging it.

A loader that dies (the out-of-memory killer's usual choice, or a decoder
that crashes) must not leave its worker waiting: ``multiprocessing.Pool``,
on which Chainer's ``MultiprocessIterator`` is built, replaces a dead
process but loses its task, so the batch never comes, the worker waits for
ever and the others wait for it in the next all-reduce; ``concurrent.
futures``' pool notices the death but then waits for the other loaders,
which ignore the SIGTERM it sends them. Here each loader has its own pipe,
and the worker waits on the pipe and on the process together: a loader
that ends before it answers kills the others and raises
:class:`errors.LoaderDiedError`, one line, which ends the job.

Loaders start from the forkserver (forks of a process that has started MPI
crash on InfiniBand), ignore the stop signals (a scheduler sends them to
every process of the job; the training process decides when to stop) and
die with it; they also end when their pipe closes, and at the training
process's exit, however it exits.
"""
import collections
import ctypes
import multiprocessing
from multiprocessing import connection
from multiprocessing import util
import signal

from largebatch.errors import LoaderDiedError

_PR_SET_PDEATHSIG = 1


def _serve(pipe, load, context):
    """A loader: ``load(context, task)`` of each list of tasks that comes
    down ``pipe``, answered with ``(True, results)`` or ``(False, the
    exception)``, until the pipe closes or brings None."""
    for number in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
        signal.signal(number, signal.SIG_IGN)
    try:  # dies with its parent, the forkserver, which ends with training
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG,
                                                int(signal.SIGKILL))
    except (OSError, AttributeError):  # not Linux
        pass
    try:
        while True:
            tasks = pipe.recv()
            if tasks is None:
                return
            try:
                answer = True, [load(context, task) for task in tasks]
            except Exception as e:
                answer = False, e
            pipe.send(answer)
    except (EOFError, OSError):  # the training process closed its end
        return


def _end_loaders(processes, pipes):
    for process in processes:
        if process.is_alive():
            process.kill()
    for pipe in pipes:
        pipe.close()
    for process in processes:
        process.join()


class LoaderPool(object):
    """``n_processes`` loaders, each holding ``context`` (sent once, when it
    starts); :meth:`submit` has them run ``load(context, task)`` over a list
    of tasks, each loader a contiguous part, while the caller goes on.
    ``load`` is a module-level function. With no processes, a submitted
    list loads in this process when its results are asked for, so that an
    iterator prefetches the same way with loaders or without."""

    def __init__(self, n_processes, load, context):
        self._load, self._context = load, context
        forkserver = multiprocessing.get_context('forkserver')
        self._processes, self._pipes = [], []
        for _ in range(n_processes):
            mine, theirs = forkserver.Pipe()
            process = forkserver.Process(target=_serve, daemon=True,
                                         args=(theirs, load, context))
            process.start()
            theirs.close()
            self._processes.append(process)
            self._pipes.append(mine)
        self._waiting = collections.deque()  # submitted, not yet received
        self._dead = False
        # before multiprocessing joins its children at exit
        self._finalizer = util.Finalize(
            self, _end_loaders, (self._processes, self._pipes),
            exitpriority=100)

    def submit(self, tasks):
        """A :class:`Loading` of ``tasks``; raises LoaderDiedError once a
        loader has died."""
        if self._dead:
            raise LoaderDiedError()
        if not self._processes:
            return LoadingHere(self._load, self._context, tasks)
        share = -(-len(tasks) // len(self._processes))
        parts = [(loader, tasks[start:start + share]) for loader, start in
                 enumerate(range(0, len(tasks), share))] if tasks else []
        for loader, part in parts:
            try:
                self._pipes[loader].send(part)
            except OSError:  # it ended: the pipe is broken
                self._died()
        loading = Loading(self, [loader for loader, _ in parts])
        self._waiting.append(loading)
        return loading

    def receive(self, loading):
        """Receive the answers up to ``loading``'s (those of loadings that
        were dropped unread are received and discarded on the way)."""
        while loading.answers is None:
            if self._dead:
                raise LoaderDiedError()
            oldest = self._waiting.popleft()
            oldest.answers = [self._answer(loader)
                              for loader in oldest.loaders]

    def _answer(self, loader):
        pipe, process = self._pipes[loader], self._processes[loader]
        connection.wait([pipe, process.sentinel])
        try:
            return pipe.recv()
        except (EOFError, OSError):  # it ended before answering
            self._died()

    def _died(self):
        self._dead = True
        self.close()
        raise LoaderDiedError() from None

    def close(self):
        """End the loaders."""
        self._finalizer()


class Loading(object):
    """The results of one :meth:`LoaderPool.submit`, in task order."""

    def __init__(self, pool, loaders):
        self.pool, self.loaders, self.answers = pool, loaders, None

    def get(self):
        """The results; a loader's exception is raised here."""
        self.pool.receive(self)
        results = []
        for ok, value in self.answers:
            if not ok:
                raise value
            results += value
        return results


class LoadingHere(object):
    """A :meth:`LoaderPool.submit` of a pool without processes: loaded in
    this process by :meth:`get`, so a loading dropped unread costs nothing."""

    def __init__(self, load, context, tasks):
        self.load, self.context, self.tasks = load, context, tasks

    def get(self):
        """The results; an exception of ``load`` is raised here."""
        return [self.load(self.context, task) for task in self.tasks]

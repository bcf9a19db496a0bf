"""imagenet_job.signal_stop: a signal sets a flag that every worker agrees on
after the update; a second one ends the process."""
import os
import signal
import subprocess
import sys

from imagenet_job import signal_stop


class OneWorker(object):
    """A ChainerMN communicator of one worker: its mpi_comm all-reduces."""

    def __init__(self):
        self.mpi_comm = self

    def allreduce(self, value, op=None):
        return value


class Trainer(object):
    class updater(object):
        iteration = 7


def test_a_signal_stops_after_the_update(monkeypatch):
    previous = {n: signal.getsignal(n) for n in signal_stop.SIGNALS}
    try:
        stop = signal_stop.SignalStop(OneWorker())
        trigger = stop.stop_trigger((10, 'iteration'))
        stop(Trainer)
        assert not stop.requested(Trainer) and not trigger(Trainer)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert not stop.requested(Trainer)  # not before the workers agree
        stop(Trainer)
        assert stop.requested(Trainer) and trigger(Trainer)
        assert not trigger.reached
        assert (stop.signal_name, stop.iteration) == ('SIGUSR1', 7)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def test_a_second_signal_ends_the_process():
    code = ('import os, signal, time\n'
            'import largebatch.chainer_compat\n'
            'from imagenet_job import signal_stop\n'
            'stop = signal_stop.SignalStop(None)\n'
            'os.kill(os.getpid(), signal.SIGTERM)\n'
            'os.kill(os.getpid(), signal.SIGTERM)\n'  # the same, twice
            'print(stop.received, flush=True)\n'
            'time.sleep(2.5)\n'
            'os.kill(os.getpid(), signal.SIGTERM)\n'
            'time.sleep(5)\n'
            'print("still here")\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=60, cwd=os.path.dirname(
                              os.path.dirname(os.path.dirname(
                                  os.path.abspath(__file__)))))
    assert proc.stdout == '15\n'
    assert proc.returncode == -signal.SIGTERM


def test_a_second_signal_after_the_workers_agreed_is_ignored():
    code = ('import os, signal, time\n'
            'import largebatch.chainer_compat\n'
            'from imagenet_job import signal_stop\n'
            'from test_signal_stop import OneWorker, Trainer\n'
            'stop = signal_stop.SignalStop(OneWorker())\n'
            'os.kill(os.getpid(), signal.SIGUSR1)\n'
            'stop(Trainer)\n'  # the workers agree: the snapshot comes next
            'time.sleep(2.5)\n'
            'os.kill(os.getpid(), signal.SIGUSR1)\n'
            'time.sleep(0.5)\n'
            'print("stopping with", stop.signal_name)\n')
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True,
        timeout=60, cwd=os.path.dirname(os.path.dirname(here)),
        env=dict(os.environ, PYTHONPATH=here))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == 'stopping with SIGUSR1\n'

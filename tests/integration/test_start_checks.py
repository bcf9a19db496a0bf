"""The start's checks, in real processes: workers started with different
flags or files end in one line naming the flag; an environment that MPI
cannot start with ends a worker in one line naming the variable; Open MPI's
help texts are found without a launcher; a path the locale cannot encode
trains, resumes and exports."""
import importlib.util
import os
import subprocess
import sys

import numpy
import pytest

from conftest import mpi_command
from conftest import REPO

TRAINER = os.path.join(REPO, 'train_imagenet.py')
#: A run of one iteration of a narrow network on the demo data set.
TINY = ['--demo', '--iterations', '1', '--width', '0.125', '--batchsize',
        '4', '--loaderjob', '0']


def environ(**changes):
    """The tests' environment with ``changes``; None unsets a variable."""
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS='1')
    env.update(changes)
    return {name: value for name, value in env.items() if value is not None}


def run(argv, env=None, timeout=180):
    return subprocess.run(argv, capture_output=True, text=True, cwd=REPO,
                          env=env or environ(), timeout=timeout)


def error_line(proc):
    """The one line of a job that ended with exit status 2."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr and 'Sorry' not in proc.stderr
    lines = [line for line in proc.stderr.splitlines()
             if line.startswith('train_imagenet.py')]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def two_workers(first, second, first_dir=REPO, second_dir=REPO):
    """``mpiexec`` of two workers (MPMD), each with its flags and working
    directory."""
    launcher = mpi_command(1, [])[:-1]  # mpiexec and its options
    return run(launcher + ['--wdir', first_dir, sys.executable, TRAINER] +
               first + [':', '-n', '1', '--wdir', second_dir, sys.executable,
                        TRAINER] + second)


def test_workers_started_with_different_flags(tmp_path):
    out = str(tmp_path / 'out')
    line = error_line(two_workers(TINY + ['--out', out, '--lr', '0.1'],
                                  TINY + ['--out', out, '--lr', '5']))
    assert line == (
        'train_imagenet.py: error: --lr differs between workers: 0.1 on rank '
        '0, 5.0 on rank 1; start every worker with the same flags')
    assert not os.path.exists(out)  # nothing claimed, nothing written


def test_per_node_copies_of_a_mean_file_that_differ(tmp_path):
    for node, blue in (('a', 120), ('b', 121)):
        (tmp_path / node).mkdir()
        numpy.save(str(tmp_path / node / 'mean.npy'),
                   numpy.array([100, 110, blue], numpy.float32))
    flags = TINY + ['--out', str(tmp_path / 'out'), '--mean', 'mean.npy']
    line = error_line(two_workers(flags, flags, str(tmp_path / 'a'),
                                  str(tmp_path / 'b')))
    assert line.startswith('train_imagenet.py: error: --mean mean.npy '
                           'differs between workers: 140 bytes sha256:')
    assert line.endswith(' on rank 1; give every worker the same file')


@pytest.mark.parametrize('changes, expected', [
    (dict(TMPDIR='{tmp}/none'), 'TMPDIR={tmp}/none: not a writable directory '
     '(No such file or directory); Open MPI keeps its session directory '
     'there: set TMPDIR to one'),
    (dict(TMPDIR='{tmp}/file/sub'), 'TMPDIR={tmp}/file/sub: not a writable '
     'directory (Not a directory)'),
    (dict(HOME=None), 'HOME is not set, and Open MPI does not start without '
     'it; set HOME to your home directory'),
    (dict(SLURM_PROCID='abc'), 'SLURM_PROCID=abc: not a rank (a non-negative '
     'integer); unset it, or start the job with the launcher that sets it'),
    (dict(OMPI_COMM_WORLD_RANK='x'), 'OMPI_COMM_WORLD_RANK=x: not a rank'),
])
def test_an_environment_mpi_cannot_start_with(tmp_path, changes, expected):
    (tmp_path / 'file').write_text('')
    tmp = str(tmp_path)
    out = str(tmp_path / 'out')
    line = error_line(run([sys.executable, TRAINER, '--out', out] + TINY,
                          env=environ(**{
                              name: value and value.format(tmp=tmp)
                              for name, value in changes.items()})))
    assert line.startswith('train_imagenet.py: error: ' + expected.format(
        tmp=tmp)), line
    assert not os.path.exists(out) and not os.path.exists(tmp + '/none')


def test_a_home_that_cannot_be_written_warns_once_and_trains(tmp_path):
    home = tmp_path / 'file'
    home.write_text('')
    proc = run([sys.executable, TRAINER, '--out', str(tmp_path / 'out')] +
               TINY, env=environ(HOME=str(home), MPLCONFIGDIR=None,
                                 TMPDIR=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        'train_imagenet.py: warning: HOME={}: not a writable directory (Not '
        'a directory); matplotlib\'s and CuPy\'s caches are temporary in '
        'this run: set HOME, or CUPY_CACHE_DIR and MPLCONFIGDIR, to writable '
        'directories to keep them'.format(home)]
    assert (tmp_path / 'out' / 'loss.png').exists()
    assert not [name for name in os.listdir(str(tmp_path))
                if name.startswith('train_imagenet-caches-')]  # removed


def test_open_mpi_prints_its_help_texts_without_a_launcher(tmp_path):
    """A one-process MPI start that fails (no session directory) says why
    in Open MPI's own words, not "Sorry! You were supposed to get help"."""
    (tmp_path / 'file').write_text('')
    proc = run([sys.executable, '-c', 'from communicators import mpi_start; '
                'mpi_start.start_mpi()'], env=environ(
                    TMPDIR=str(tmp_path / 'file' / 'sub'), OPAL_PREFIX=None))
    assert 'A call to mkdir was unable to create' in proc.stderr, proc.stderr
    assert 'Sorry' not in proc.stderr


def test_an_out_the_locale_cannot_encode_trains_resumes_and_exports(
        tmp_path):
    out = os.path.join(os.fsencode(str(tmp_path)), b'r\xff')
    env = environ(PYTHONIOENCODING='utf-8')  # a strict standard output
    shown = os.fsdecode(out).encode('utf-8', 'backslashreplace').decode()
    for iterations in ('1', '2'):
        proc = subprocess.run(
            [os.fsencode(sys.executable), os.fsencode(TRAINER), b'--out', out,
             b'--resume', b'auto'] + [os.fsencode(a) for a in TINY] +
            [b'--iterations', iterations.encode()],
            capture_output=True, cwd=REPO, env=env, timeout=180)
        stdout = proc.stdout.decode('utf-8')
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
        assert 'finished at iteration {}'.format(iterations) in stdout
        assert 'in {} (newest snapshot_iter_{})'.format(
            shown, iterations) in stdout
    assert 'resuming from {}'.format(os.path.join(
        shown, 'snapshot_iter_1')) in stdout
    proc = subprocess.run(
        [os.fsencode(sys.executable), os.fsencode(os.path.join(
            REPO, 'export_onnx.py')), os.path.join(out, b'model.npz'),
         os.path.join(out, b'model.onnx')],
        capture_output=True, cwd=REPO, env=env, timeout=180)
    if importlib.util.find_spec('onnx') is None:  # the NumPy 1.x venv's
        assert proc.stderr.decode() == (
            "export_onnx.py: error: the onnx package is not installed; pip "
            "install -e '.[onnx]'\n")
        return
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert proc.stdout.decode() == 'wrote {}\n'.format(
        os.path.join(shown, 'model.onnx'))

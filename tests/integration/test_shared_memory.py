"""The image index in a /dev/shm that is too small or read-only: one line
and exit status 2, not SIGBUS or a traceback (Docker's default /dev/shm
is 64 MB)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


def train_in_a_private_shm(tmp_path, options):
    """The demo trained with /dev/shm a tmpfs mounted with ``options``, in
    a mount namespace of its own; the CompletedProcess."""
    if os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('needs root and unshare to mount a private /dev/shm')
    train = [sys.executable, 'train_imagenet.py', '--demo', '--iterations',
             '1', '--loaderjob', '0', '--out', str(tmp_path / 'out')]
    script = ('mount -t tmpfs -o {} tmpfs /dev/shm && exec "$@"'
              .format(options))
    return subprocess.run(
        ['unshare', '--mount', 'sh', '-c', script, 'sh'] + train, cwd=REPO,
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS='1'))


@pytest.mark.parametrize('options, expected', [
    ('size=64k', '/dev/shm: no room for the image index ('),
    ('ro', '/dev/shm: cannot hold the image index (Read-only file system)'),
])
def test_a_small_or_read_only_shm_ends_in_one_line(tmp_path, options,
                                                   expected):
    proc = train_in_a_private_shm(tmp_path, options)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [line for line in lines if expected in line], proc.stderr
    assert len(lines) == 1
    assert not os.path.exists(str(tmp_path / 'out'))

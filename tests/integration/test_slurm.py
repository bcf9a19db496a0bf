"""jobs/slurm.sh under a real one-node Slurm (jobs/local_slurm.sh): a CPU
smoke run that trains and snapshots, and bad input that fails the job with
the trainer's one-line error at the end of its output."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import MPIEXEC, REPO

LOCAL_SLURM = os.path.join(REPO, 'jobs', 'local_slurm.sh')
STATE_DIR = '/tmp/local-slurm'      # local_slurm.sh's default
ENDED = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL',
         'OUT_OF_MEMORY', 'BOOT_FAIL', 'DEADLINE', 'PREEMPTED')


def _alive(pid_file):
    try:
        with open(pid_file) as f:
            os.kill(int(f.read()), 0)
    except (OSError, ValueError):
        return False
    return True


@pytest.fixture(scope='session')
def slurm():
    """The environment that reaches the one-node cluster, started once."""
    missing = [c for c in ('sbatch', 'scontrol', 'slurmctld', 'slurmd',
                           'munged') if shutil.which(c) is None]
    if missing:
        pytest.skip('Slurm is not installed ({} missing; apt-get install '
                    'slurm-wlm munge)'.format(', '.join(missing)))
    if os.geteuid() != 0:
        pytest.skip('jobs/local_slurm.sh runs the Slurm daemons as root')
    was_running = _alive(os.path.join(STATE_DIR, 'slurmctld.pid'))
    env = dict(os.environ, LOCAL_SLURM_DIR=STATE_DIR,
               SLURM_CONF=os.path.join(STATE_DIR, 'slurm.conf'))
    proc = subprocess.run([LOCAL_SLURM, 'start'], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield env
    if not was_running:
        subprocess.run([LOCAL_SLURM, 'stop'], env=env, timeout=60)


def submit(env, out, settings, timeout=240):
    """Runs jobs/slurm.sh on one node with 2 CPU tasks; returns its state,
    exit code and output (what sbatch --output received)."""
    exports = ','.join(['ALL', 'SMOKE=1', 'PYTHON=' + sys.executable,
                        'MPIEXEC=' + MPIEXEC, 'OUT_ROOT=' + str(out)] +
                       ['{}={}'.format(k, v) for k, v in settings.items()])
    log = str(out / 'slurm-%j.out')
    job_id = subprocess.check_output(
        ['sbatch', '--parsable', '--nodes=1', '--ntasks-per-node=2',
         '--cpus-per-task=1', '--gpus-per-node=0', '--time=5',
         '--output=' + log, '--export=' + exports, 'jobs/slurm.sh'],
        cwd=REPO, env=env, text=True, timeout=30).strip()
    deadline = time.time() + timeout
    while True:
        fields = dict(
            f.split('=', 1) for f in subprocess.check_output(
                ['scontrol', '--oneliner', 'show', 'job', job_id], env=env,
                text=True, timeout=30).split() if '=' in f)
        if fields['JobState'] in ENDED:
            break
        if time.time() > deadline:
            subprocess.run(['scancel', job_id], env=env, timeout=30)
            pytest.fail('job {} still {} after {} s'.format(
                job_id, fields['JobState'], timeout))
        time.sleep(0.5)
    with open(log.replace('%j', job_id)) as f:
        return fields['JobState'], fields['ExitCode'], f.read()


def test_smoke_job_trains_under_mpiexec_in_the_allocation(slurm, tmp_path):
    state, code, output = submit(slurm, tmp_path, dict(
        LAUNCHER='mpiexec', BATCHSIZE=4, VAL_BATCHSIZE=16, LOADERJOB=0,
        ITERATIONS=2, EXTRA_ARGS='--test'))
    assert (state, code) == ('COMPLETED', '0:0'), output
    assert 'workers: 2' in output
    (out,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert (out / 'hostfile').read_text().split() == [
        os.uname().nodename.split('.')[0], 'slots=2']
    with open(str(out / 'log')) as f:
        assert json.load(f)[-1]['iteration'] == 2
    assert (out / 'snapshot_iter_2').exists()


def test_bad_input_fails_the_srun_job_with_one_line(slurm, tmp_path):
    # mpiexec's failed launch ends the same way: test_jobs.py.
    missing = str(tmp_path / 'train.txt')
    state, code, output = submit(slurm, tmp_path, dict(
        LAUNCHER='srun', TRAIN=missing, VAL=missing))
    if 'Couldn\'t load specified plugin name for mpi/pmix' in output:
        pytest.skip("Slurm's PMIx plugin cannot load libpmix.so "
                    '(apt-get install libpmix-dev)')
    assert (state, code) == ('FAILED', '2:0'), output
    last = output.rstrip('\n').splitlines()[-1]
    assert last.startswith('train_imagenet.py: error: ') and missing in last
    assert 'Traceback' not in output and '-' * 74 not in output

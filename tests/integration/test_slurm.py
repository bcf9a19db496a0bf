"""jobs/slurm.sh under a real one-node Slurm (jobs/local_slurm.sh): a CPU
smoke run that trains and snapshots, a signalled job that stops with a
snapshot, requeues itself and resumes, and bad input that fails the job with
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


def sbatch(env, out, settings, hold=False):
    """Submits jobs/slurm.sh on one node with 2 CPU tasks; returns the job
    id and the path of its output (what sbatch --output receives). With
    ``hold``, the job waits for ``scontrol release``."""
    exports = ','.join(['ALL', 'SMOKE=1', 'PYTHON=' + sys.executable,
                        'MPIEXEC=' + MPIEXEC, 'OUT_ROOT=' + str(out)] +
                       ['{}={}'.format(k, v) for k, v in settings.items()])
    log = str(out / 'slurm-%j.out')
    job_id = subprocess.check_output(
        ['sbatch', '--parsable', '--nodes=1', '--ntasks-per-node=2',
         '--cpus-per-task=1', '--gpus-per-node=0', '--time=10',
         '--output=' + log, '--open-mode=append', '--export=' + exports]
        + ['--hold'] * hold + ['jobs/slurm.sh'], cwd=REPO, env=env,
        text=True, timeout=30).strip()
    return job_id, log.replace('%j', job_id)


def release(env, job_id):
    subprocess.run(['scontrol', 'release', job_id], env=env, check=True,
                   timeout=30)


def earlier_run(out, name, job_id, cluster, created):
    """A run directory that an earlier job with this id made (ids repeat
    after a controller reset, and across clusters sharing a file system).
    """
    directory = out / name
    directory.mkdir()
    (directory / 'job.record').write_text(
        'job={}\ncluster={}\ncreated={}\n'
        'start=0 2020-01-01 00:00:00 slurm.sh n1\n'.format(
            job_id, cluster, created))
    (directory / 'args.json').write_text('[]')
    (directory / 'log').write_text('[]')
    return directory


def contents(directory):
    return sorted((p.name, p.read_text()) for p in directory.iterdir())


def job_fields(env, job_id, tries=5):
    """The job's fields; a controller that does not answer (it times out
    under load) is asked again, a second apart."""
    for attempt in range(tries):
        proc = subprocess.run(
            ['scontrol', '--oneliner', 'show', 'job', job_id], env=env,
            capture_output=True, text=True, timeout=30)
        if proc.returncode == 0 or attempt == tries - 1:
            break
        time.sleep(1)
    assert proc.returncode == 0, proc.stderr
    return dict(f.split('=', 1) for f in proc.stdout.split() if '=' in f)


def wait_until(env, job_id, ready, timeout):
    """The job's fields once ``ready(fields)`` or the job ended."""
    deadline = time.time() + timeout
    while True:
        fields = job_fields(env, job_id)
        if fields['JobState'] in ENDED or ready(fields):
            return fields
        if time.time() > deadline:
            subprocess.run(['scancel', job_id], env=env, timeout=30)
            pytest.fail('job {} still {} after {} s'.format(
                job_id, fields['JobState'], timeout))
        time.sleep(0.5)


def submit(env, out, settings, timeout=240, before=None):
    """Runs jobs/slurm.sh to its end; returns its state, exit code and
    output. ``before(job_id)`` runs before the job may start."""
    job_id, log = sbatch(env, out, settings, hold=before is not None)
    if before is not None:
        before(job_id)
        release(env, job_id)
    fields = wait_until(env, job_id, lambda fields: False, timeout)
    with open(log) as f:
        return fields['JobState'], fields['ExitCode'], f.read()


def skip_without_pmix(output):
    if 'Couldn\'t load specified plugin name for mpi/pmix' in output:
        pytest.skip("Slurm's PMIx plugin cannot load libpmix.so "
                    '(apt-get install libpmix-dev)')


def test_smoke_job_trains_under_mpiexec_in_the_allocation(slurm, tmp_path):
    # A first start makes a new directory, whatever holds its job id.
    decoys = []
    state, code, output = submit(slurm, tmp_path, dict(
        LAUNCHER='mpiexec', BATCHSIZE=4, VAL_BATCHSIZE=16, LOADERJOB=0,
        ITERATIONS=2, EXTRA_ARGS='--test'), before=lambda job_id: (
            decoys.append(earlier_run(tmp_path, '20200101-000000-' + job_id,
                                      job_id, 'local', 1))))
    assert (state, code) == ('COMPLETED', '0:0'), output
    assert 'workers: 2' in output
    (decoy,) = decoys
    assert contents(decoy) == [('args.json', '[]'), ('job.record', (
        decoy / 'job.record').read_text()), ('log', '[]')]
    (out,) = [d for d in tmp_path.iterdir() if d.is_dir() and d != decoy]
    job_id = decoy.name.rsplit('-', 1)[1]
    record = (out / 'job.record').read_text().splitlines()
    assert record[1:3] == ['job=' + job_id, 'cluster=local']
    assert record[4].startswith('start=0 ')
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
    skip_without_pmix(output)
    assert (state, code) == ('FAILED', '2:0'), output
    last = output.rstrip('\n').splitlines()[-1]
    assert last.startswith('train_imagenet.py: error: ') and missing in last
    assert 'Traceback' not in output and '-' * 74 not in output


def test_a_signalled_job_stops_with_a_snapshot_requeues_and_resumes(
        slurm, tmp_path):
    # What Slurm's --signal=USR1@300 does before the time limit, on demand.
    job_id, log = sbatch(slurm, tmp_path, dict(
        LAUNCHER='srun', BATCHSIZE=4, VAL_BATCHSIZE=16, LOADERJOB=0,
        ITERATIONS=40, EXTRA_ARGS='--test --width 0.25'), hold=True)
    # Runs of earlier jobs with its id: on this cluster before a controller
    # reset (made before it), on another cluster (made later).
    decoys = [earlier_run(tmp_path, '20200101-000000-' + job_id, job_id,
                          'local', 1),
              earlier_run(tmp_path, '20991231-000000-' + job_id, job_id,
                          'another', 9999999999)]
    kept = [contents(d) for d in decoys]
    release(slurm, job_id)

    def own():
        return [d for d in tmp_path.iterdir()
                if d.is_dir() and d not in decoys]

    def training(fields):
        out = own()
        return out and (out[0] / 'log').exists()
    assert wait_until(slurm, job_id, training, 240)['JobState'] == 'RUNNING'
    subprocess.run(['scancel', '--signal=USR1', job_id], env=slurm,
                   check=True, timeout=30)
    fields = wait_until(slurm, job_id, lambda fields: False, 300)
    with open(log) as f:
        output = f.read()
    skip_without_pmix(output)
    assert (fields['JobState'], fields['ExitCode']) == ('COMPLETED', '0:0'), \
        output
    assert fields['Restarts'] == '1', output
    assert 'stopped by SIGUSR1 after iteration' in output
    assert 'requeueing job {}'.format(job_id) in output
    (out,) = own()
    assert [contents(d) for d in decoys] == kept
    starts = [line for line in (out / 'job.record').read_text().splitlines()
              if line.startswith('start=')]
    assert [line.split()[0] for line in starts] == ['start=0', 'start=1']
    stopped = int(output.split('stopped by SIGUSR1 after iteration ')[1]
                  .split(';')[0])
    assert 0 < stopped < 40
    assert 'resuming from {}'.format(out / 'snapshot_iter_{}'.format(
        stopped)) in output
    with open(str(out / 'log')) as f:
        assert json.load(f)[-1]['iteration'] == 40
    with open(str(out / 'job.log')) as f:  # both segments, appended
        job_log = f.read()
    assert job_log.count(' starts {} on '.format(out.name)) == 2, job_log
    assert job_log.index('stopped by SIGUSR1') < job_log.rindex(' starts ')
    assert 'resuming from' in job_log

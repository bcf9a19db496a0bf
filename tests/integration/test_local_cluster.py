"""Jobs across two emulated nodes (jobs/local_cluster.sh): the ranks and
GPUs each node's processes get, two nodes x 2 ranks through
jobs/multi_node.sh and through Slurm (srun's PMIx) equal to one node x 4
ranks bit for bit, and a node that loses power mid-training: the job ends
with one line naming it, and resumes from its newest snapshot on the other
node."""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy
import pytest

from conftest import MPIEXEC, REPO
from test_jobs import clean_env

LOCAL_CLUSTER = os.path.join(REPO, 'jobs', 'local_cluster.sh')
ITERATIONS = 6
TINY = ('--width 0.125 --snapshot-iterations 2 --log-interval 2 '
        '--val_batchsize 16')


def can_make_namespaces():
    """None, or why this machine cannot make the nodes."""
    if os.geteuid() != 0:
        return 'the emulated nodes need root (network namespaces)'
    missing = [c for c in ('unshare', 'nsenter', 'setpriv', 'ip')
               if shutil.which(c) is None]
    if missing:
        return '{} not installed (util-linux, iproute2)'.format(
            ', '.join(missing))
    proc = subprocess.run(['unshare', '--net', '--uts', '--mount', '--pid',
                           '--fork', 'true'], capture_output=True, text=True)
    if proc.returncode != 0:
        return 'namespaces cannot be made here: ' + proc.stderr.strip()
    return None


def start_cluster(directory):
    """jobs/local_cluster.sh -n 2, held open; returns the process."""
    reason = can_make_namespaces()
    if reason:
        pytest.skip(reason)
    proc = subprocess.Popen([LOCAL_CLUSTER, '-n', '2'], env=dict(
        os.environ, LOCAL_CLUSTER_DIR=directory), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    if not first.startswith('2 emulated nodes: node1,node2'):
        proc.kill()
        pytest.fail('local_cluster.sh did not start: ' + first +
                    proc.stderr.read())
    return proc


def cluster_pids(directory):
    return [int(open(os.path.join(directory, f)).read())
            for f in os.listdir(directory) if f.endswith('.pid')]


def running(pid):
    """Alive, and not a zombie waiting for its parent."""
    try:
        with open('/proc/{}/stat'.format(pid)) as f:
            return f.read().rsplit(') ', 1)[1][0] != 'Z'
    except OSError:
        return False


def gone(pids, timeout=10):
    deadline = time.time() + timeout
    while any(running(p) for p in pids):
        if time.time() > deadline:
            return False
        time.sleep(0.1)
    return True


def started_by(directory):
    """The processes that have LOCAL_CLUSTER_DIR=directory."""
    marker = 'LOCAL_CLUSTER_DIR={}\0'.format(directory).encode()
    pids = []
    for pid in os.listdir('/proc'):
        try:
            with open('/proc/{}/environ'.format(pid), 'rb') as f:
                if marker in f.read():
                    pids.append(int(pid))
        except (OSError, ValueError):
            pass
    return pids


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    """The environment that reaches two emulated nodes."""
    directory = str(tmp_path_factory.mktemp('nodes') / 'cluster')
    proc = start_cluster(directory)
    pids = cluster_pids(directory)
    yield dict(LOCAL_CLUSTER_DIR=directory,
               PRTE_MCA_plm_ssh_agent=os.path.join(directory, 'on'))
    proc.terminate()
    assert proc.wait(timeout=30) == 143
    assert gone(pids) and not os.path.exists(directory)


def on_node1(cluster, settings, timeout=300, popen=None):
    """jobs/multi_node.sh on node1 with settings; a CompletedProcess, or
    with popen a Popen."""
    env = clean_env(**cluster)
    # `on` joins its arguments into one shell command, as ssh does.
    command = [LOCAL_CLUSTER, 'on', 'node1'] + [shlex.quote(a) for a in (
        ['env'] + ['{}={}'.format(k, v) for k, v in settings.items()] +
        [os.path.join(REPO, 'jobs', 'multi_node.sh')])]
    if popen is not None:
        return subprocess.Popen(command, env=env, cwd=REPO, **popen)
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def smoke(out, hosts, per_node, **more):
    settings = dict(SMOKE='1', HOSTS=hosts, GPUS_PER_NODE=str(per_node),
                    OUT_DIR=str(out), BATCHSIZE='4', LOADERJOB='0',
                    ITERATIONS=str(ITERATIONS), PYTHON=sys.executable,
                    MPIEXEC=MPIEXEC)
    settings.update(more, EXTRA_ARGS=TINY)
    return settings


def params(path):
    with numpy.load(str(path)) as snapshot:
        return {k: snapshot[k] for k in snapshot.files
                if k.startswith('updater/model:main/')}


def assert_same_params(a, b):
    first, second = params(a), params(b)
    assert first.keys() == second.keys() and len(first) > 100
    for key in first:
        assert (first[key] == second[key]).all(), key


@pytest.fixture(scope='module')
def one_node_x4(cluster, tmp_path_factory):
    """The reference: node1 alone, 4 ranks."""
    out = tmp_path_factory.mktemp('one-node') / 'out'
    proc = on_node1(cluster, smoke(out, 'node1', 4))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'nodes: node1 ranks 0-3' in proc.stdout
    return out


PROBE = """\
import json, os, socket, sys
print(json.dumps(dict(
    host=socket.gethostname(), rank=int(os.environ['OMPI_COMM_WORLD_RANK']),
    local_rank=int(os.environ['OMPI_COMM_WORLD_LOCAL_RANK']),
    device=sys.argv[sys.argv.index('--device') + 1],
    visible=os.environ.get('CUDA_VISIBLE_DEVICES'))), flush=True)
"""


@pytest.mark.parametrize('mode', ['cuda', 'cuda-visible'])
def test_each_node_numbers_its_ranks_and_gpus(cluster, tmp_path, mode):
    probe = tmp_path / 'probe.py'
    probe.write_text(PROBE)
    proc = on_node1(cluster, dict(
        HOSTS='node1,node2', GPUS_PER_NODE='2', DEVICE_MODE=mode,
        TRAINER=str(probe), OUT_DIR=str(tmp_path / 'out'),
        PYTHON=sys.executable, MPIEXEC=MPIEXEC))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = sorted((json.loads(line) for line in proc.stdout.splitlines()
                   if line.startswith('{')), key=lambda r: r['rank'])
    expected = []
    for rank in range(4):
        local = rank % 2
        expected.append(dict(
            host='node{}'.format(rank // 2 + 1), rank=rank, local_rank=local,
            device='@cupy:{}'.format(local if mode == 'cuda' else 0),
            visible=None if mode == 'cuda' else str(local)))
    assert seen == expected


def test_two_nodes_equal_one_node_bit_for_bit(cluster, one_node_x4,
                                              tmp_path):
    out = tmp_path / 'out'
    proc = on_node1(cluster, smoke(out, 'node1,node2', 2))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'nodes: node1 ranks 0-1, node2 ranks 2-3' in proc.stdout
    assert (out / 'hostfile').read_text().split() == [
        'node1', 'slots=2', 'node2', 'slots=2']
    name = 'snapshot_iter_{}'.format(ITERATIONS)
    assert_same_params(out / name, one_node_x4 / name)


@pytest.mark.parametrize('resume_on', ['node1 x4', 'node1 x2'])
def test_a_node_that_loses_power_ends_the_job(cluster, one_node_x4,
                                              tmp_path, resume_on):
    out = tmp_path / 'out'
    # Long enough that node2 is lost mid-training; VIRTUAL_WORKERS keeps
    # 4 virtual workers on whatever the nodes left hold.
    job = on_node1(cluster, smoke(out, 'node1,node2', 2, ITERATIONS='1000',
                                  VIRTUAL_WORKERS='4'),
                   popen=dict(stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True))
    deadline = time.time() + 240
    while not (out / 'snapshot_iter_2').exists():
        assert job.poll() is None and time.time() < deadline, (
            job.stdout.read() if job.poll() is not None else 'no snapshot')
        time.sleep(0.05)
    env = clean_env(**cluster)
    try:
        start = time.time()
        subprocess.run([LOCAL_CLUSTER, 'power-off', 'node2'], env=env,
                       check=True, timeout=30)
        output, _ = job.communicate(timeout=60)
        ended = time.time() - start
        assert ended < 30, ended
        assert job.returncode != 0, output
        last = output.rstrip('\n').splitlines()[-1]
        assert last == ('error: node node2 lost (ranks 2-3): no answer from '
                        'it, so Open MPI ended the job'), output[-3000:]
        assert '-' * 74 not in output
    finally:
        job.kill()
        subprocess.run([LOCAL_CLUSTER, 'power-on', 'node2'], env=env,
                       timeout=30)

    # The newest snapshot loads; node1 alone resumes from it: with 4 ranks
    # it ends where the one-node run ended, bit for bit; with 2 ranks
    # (elastic: 2 micro-batches each) it ends there too, but for the order
    # of the float32 gradient sums.
    newest = max((p for p in out.iterdir()
                  if p.name.startswith('snapshot_iter_')),
                 key=lambda p: int(p.name.rsplit('_', 1)[1]))
    assert len(params(newest)) > 100
    per_node = int(resume_on[-1])
    resumed = on_node1(cluster, smoke(out, 'node1', per_node, RESUME='auto',
                                      VIRTUAL_WORKERS='4'))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + \
        resumed.stderr[-3000:]
    assert 'resuming from {}'.format(newest) in resumed.stdout
    assert 'total minibatch: 16' in resumed.stdout
    name = 'snapshot_iter_{}'.format(ITERATIONS)
    if per_node == 4:
        assert_same_params(out / name, one_node_x4 / name)
    else:
        assert '--accumulate 2' in (out / 'launch.sh').read_text()
        assert params(out / name).keys() == params(one_node_x4 / name).keys()


def test_slurm_across_two_nodes_equals_one_node(cluster, tmp_path, request):
    missing = [c for c in ('sbatch', 'slurmctld', 'slurmd', 'munged')
               if shutil.which(c) is None]
    if missing:
        pytest.skip('Slurm is not installed ({} missing; apt-get install '
                    'slurm-wlm munge)'.format(', '.join(missing)))
    one_node_x4 = request.getfixturevalue('one_node_x4')
    # munged wants every directory above its socket open to all.
    slurm = tempfile.mkdtemp(prefix='local-slurm-nodes-')
    request.addfinalizer(lambda: shutil.rmtree(slurm, ignore_errors=True))
    env = clean_env(**cluster)
    on = [LOCAL_CLUSTER, 'on', 'node1', 'env', 'LOCAL_SLURM_DIR=' + slurm,
          'SLURM_CONF={}/slurm.conf'.format(slurm)]
    start = subprocess.run(on + [
        'LOCAL_SLURM_NODES=node1,node2',
        'LOCAL_SLURM_RSH=' + cluster['PRTE_MCA_plm_ssh_agent'],
        'LOCAL_SLURM_TMPFS={}/tmp'.format(cluster['LOCAL_CLUSTER_DIR']),
        os.path.join(REPO, 'jobs', 'local_slurm.sh')], env=env, cwd=REPO,
        capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stdout + start.stderr
    out = tmp_path / 'out'
    settings = smoke(out, '', 2)
    del settings['HOSTS'], settings['GPUS_PER_NODE']
    exports = ','.join(['ALL'] + ['{}={}'.format(k, v)
                                  for k, v in settings.items()])
    job = subprocess.run(on + [shlex.quote(a) for a in [
        'sbatch', '--wait', '--nodes=2', '--ntasks-per-node=2',
        '--cpus-per-task=1', '--gpus-per-node=0', '--time=5',
        '--output={}/slurm-%j.out'.format(tmp_path), '--export=' + exports,
        'jobs/slurm.sh']], env=env, cwd=REPO, capture_output=True,
        text=True, timeout=300)
    (log,) = tmp_path.glob('slurm-*.out')
    output = log.read_text()
    if 'Couldn\'t load specified plugin name for mpi/pmix' in output:
        pytest.skip("Slurm's PMIx plugin cannot load libpmix.so "
                    '(apt-get install libpmix-dev)')
    assert job.returncode == 0, job.stdout + job.stderr + output
    assert 'nodes: node1 ranks 0-1, node2 ranks 2-3' in output
    name = 'snapshot_iter_{}'.format(ITERATIONS)
    assert_same_params(out / name, one_node_x4 / name)
    subprocess.run(on + [os.path.join(REPO, 'jobs', 'local_slurm.sh'),
                         'stop'], env=env, timeout=60)


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGKILL],
                         ids=['terminated', 'killed'])
def test_the_cluster_leaves_nothing_behind(tmp_path, sig):
    directory = str(tmp_path / 'cluster')
    proc = start_cluster(directory)
    pids = cluster_pids(directory)
    sleeper = subprocess.Popen(
        [LOCAL_CLUSTER, 'on', 'node2', 'sleep 600'],
        env=dict(os.environ, LOCAL_CLUSTER_DIR=directory))
    time.sleep(0.5)
    node2 = subprocess.run([LOCAL_CLUSTER, 'on', 'node2', 'hostname'],
                           env=dict(os.environ, LOCAL_CLUSTER_DIR=directory),
                           capture_output=True, text=True, timeout=30)
    assert node2.stdout == 'node2\n'
    links = subprocess.run(['ip', '-o', 'link'], capture_output=True,
                           text=True).stdout
    assert 'br0' not in links and 'veth' not in links
    proc.send_signal(sig)
    proc.wait(timeout=30)
    # The nodes' first processes and everything started on them are gone,
    # and with them their namespaces, links and bridge; no process started
    # by the script is left (each has its LOCAL_CLUSTER_DIR).
    assert gone(pids)
    assert gone(started_by(directory))
    assert sleeper.wait(timeout=10) != 0
    if sig == signal.SIGTERM:
        assert not os.path.exists(directory)

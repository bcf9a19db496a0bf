"""benchmarks.gpu_step on the CPU (``--device -1``): its figures and JSON."""
import json
import subprocess
import sys

from conftest import REPO


def test_cpu_run_writes_the_figures(tmp_path):
    path = str(tmp_path / 'figures.json')
    proc = subprocess.run(
        [sys.executable, '-m', 'benchmarks.gpu_step', '--device', '-1',
         '--size', '32', '--batchsizes', '2', '--warmup', '0', '--steps', '1',
         '--dtypes', 'float32', 'mixed16', '--no-torch', '--json', path],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(path) as f:
        figures = json.load(f)
    assert (figures['device'], figures['size'], figures['pytorch']) == (
        'CPU', 32, None)
    assert figures['recipe'] == 'rmsprop-warmup'
    assert figures['weight_decay'] > 0
    assert figures['communicator'] == 'NaiveCommunicator'
    assert [(row['dtype'], row['batchsize']) for row in figures['rows']] == [
        ('float32', 2), ('mixed16', 2)]
    assert all(row['chainer'] > 0 for row in figures['rows'])
    assert 'images/s' in proc.stdout


def test_bad_flag_is_one_line_exit_2():
    proc = subprocess.run(
        [sys.executable, '-m', 'benchmarks.gpu_step', '--steps', '0'],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].endswith(
        '--steps must be positive, got 0')


def test_every_timed_step_is_an_update():
    """The parameters are broadcast when the step is built, as the trainer
    does: ChainerMN's optimizer would spend the first update broadcasting
    them (in ``chainer.get_dtype()`` for ``pure_nccl``)."""
    import chainer
    import communicators
    from benchmarks import gpu_step
    from optimizers import recipes
    comm = communicators.create_communicator('naive')
    step, optimizer = gpu_step.chainer_step(
        chainer.get_device('@numpy'), comm, 32, 2, recipes.resolve())
    step()
    assert optimizer.t == 1

#!/usr/bin/env python3
"""The GPU check of ``make gpu-check``: install, stack line, kernels, step.

    python3 benchmarks/gpu_check.py [--venv .venv-gpu] [--torch]
        [--out result/gpu_check.json]
    python3 benchmarks/gpu_check.py --python PYTHON    (offline: installs
                                                         nothing)

From a checkout on a GPU machine it runs these parts in order, so that what
is most likely to fail fails first, each within its share of an 8-minute
budget offline (time a part leaves unused passes to the next), so that one
10-minute call to a lent GPU machine also has time for the install:

    install        150 s  ``make setup-gpu`` (not offline; ``--torch``:
                          also PyTorch 2.3.1, +150 s)
    requirements    10 s  offline only: a line for each package it lacks
    stack           30 s  ``python -m largebatch.cuda_stack --allow-no-cudnn``
    kernels         45 s  tests/gpu/test_kernels_gpu.py: every kernel run
                          once on small float16 and float32 arrays against
                          the CPU path
    communicator    45 s  the float16 communicators' contract on 1 GPU (and
                          2 where there are 2)
    step 32         90 s  ``benchmarks/gpu_step.py``, batch 32, float32 and
                          mixed16: images/s, the first step's seconds
                          (compilation and autotuning) and the memory pool
    tests          100 s  the other GPU tests (``pytest -m gpu``)
    demo float32    45 s  20 updates of ``train_imagenet.py --demo --gpu
    demo mixed16    45 s  --accumulate 2`` in each dtype
    step 128        70 s  batch 128, and PyTorch where it imports

CuPy's compiled kernels stay in ``result/cupy_kernel_cache`` (unless
``CUPY_CACHE_DIR`` is set), so a second check compiles nothing. Where the
stack line fails (no CuPy, no GPU) the GPU tests still run, and skip with
the reason; nothing else does. The report (``--out``; the figures' files
beside it) has what each part printed, took and returned, with the
figures; it is written again after every part, so a check cut short keeps
what ran. Exit status 1 when a part failed. A part that runs past its
deadline is ended with its whole process group (pytest's ``mpiexec`` jobs
and their ranks included).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH = 'torch==2.3.1'  # the PyTorch whose nvidia-* pins the gpu extra uses
INSTALL_SECONDS = 150
TORCH_SECONDS = 150
REQUIREMENTS_SECONDS = 10
STACK_SECONDS = 30
STEP = ['--size', '224', '--dtypes', 'float32', 'mixed16', '--warmup', '3',
        '--steps', '10']
FIRST_TESTS = ['tests/gpu/test_kernels_gpu.py',
               'tests/gpu/test_pure_nccl_fp16_gpu.py']
DEMO = ['train_imagenet.py', '--demo', '--gpu', '--accumulate', '2',
        '--iterations', '20', '--allow-no-cudnn']


def gpu_parts(python, figures):
    """``(name, seconds, argv, figures file or None)`` of the parts after
    the stack line, in order."""
    pytest = [python, '-m', 'pytest', '-q', '-rs', '-p', 'no:cacheprovider']
    step = [python, '-m', 'benchmarks.gpu_step'] + STEP
    runs = os.path.join(os.path.dirname(figures), 'gpu_check_runs')
    return [
        ('kernels', 45, pytest + [FIRST_TESTS[0]], None),
        ('communicator', 45, pytest + [FIRST_TESTS[1]], None),
        ('step 32', 90, step + ['--batchsizes', '32', '--no-torch',
                                '--json', figures + '.32.json'],
         figures + '.32.json'),
        ('tests', 100, pytest + ['-m', 'gpu', 'tests/gpu'] + [
            '--ignore=' + path for path in FIRST_TESTS], None),
        ('demo float32', 45, [python] + DEMO + [
            '--dtype', 'float32', '--out', os.path.join(
                runs, time.strftime('%Y%m%d-%H%M%S-float32'))], None),
        ('demo mixed16', 45, [python] + DEMO + [
            '--dtype', 'mixed16', '--out', os.path.join(
                runs, time.strftime('%Y%m%d-%H%M%S-mixed16'))], None),
        ('step 128', 70, step + ['--batchsizes', '128', '--json',
                                 figures + '.128.json'],
         figures + '.128.json'),
    ]


WHEELS = ('pip install --no-index --find-links wheelhouse chainer==7.8.1 '
          'pillow matplotlib pytest (make wheels; docs/gpu.md)')
# What the check imports: (module, what it is, how to get it); None: it
# runs without it.
REQUIREMENTS = [
    ('numpy', 'NumPy', "pip install 'numpy>=2'"),
    ('chainer', 'Chainer 7.8.1', WHEELS),
    ('chainermn', 'ChainerMN (in Chainer 7.8.1)', WHEELS),
    ('mpi4py', 'mpi4py', 'pip install mpi4py'),
    ('PIL', 'Pillow', WHEELS),
    ('pytest', 'pytest', WHEELS),
    ('cupy', 'CuPy', "pip install -e '.[gpu]' (docs/gpu.md)"),
    ('torch', 'PyTorch', None),
]
PROBE = """
import importlib, sys
sys.path.insert(0, '.')
from largebatch import chainer_compat
for module, what, fix in {requirements!r}:
    try:
        importlib.import_module(module)
    except Exception as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else ''
        print('{{}}: {{}} ({{}}: {{}}); {{}}'.format(
            'missing' if fix else 'without', what, type(e).__name__, reason,
            fix or 'the step is timed without it'))
"""


def run(name, argv, deadline, report):
    """Run ``argv`` in the repository until ``deadline``; record it."""
    start = time.time()
    timeout = max(1., deadline - start)
    command = ' '.join(argv).replace('\n', ' ')
    print('== {} (at most {:.0f} s): {}'.format(
        name, timeout, command if len(command) < 160 else
        command[:150] + ' ...'), flush=True)
    # A session of its own: on timeout the whole group goes, not just the
    # child (pytest would leave its mpiexec and the ranks running).
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        returncode = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        returncode = None
    print(output, end='', flush=True)
    seconds = time.time() - start
    report['parts'].append({
        'name': name, 'argv': argv, 'seconds': round(seconds, 1),
        'returncode': returncode, 'timed_out': returncode is None,
        'output_tail': output[-4000:]})
    if returncode != 0:
        print('== {}: {} after {:.0f} s'.format(
            name, 'timed out' if returncode is None
            else 'exit status {}'.format(returncode), seconds), flush=True)
    return returncode == 0, output


def _test_summary(output):
    lines = [line for line in output.splitlines() if ' in ' in line and (
        'passed' in line or 'failed' in line or 'error' in line
        or 'skipped' in line)]
    return lines[-1].strip('= ') if lines else None


def write_report(report, path):
    """Write ``report`` as JSON to ``path`` whole (a temporary file, then a
    rename), so that a reader or a cut-off check never sees half of it."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path + '.tmp', 'w') as f:
        json.dump(report, f, indent=2)
    os.replace(path + '.tmp', path)


def check(venv, with_torch, figures_path, out, python=None):
    """Run the parts in order, writing the report to ``out`` after each;
    return it. ``python``: the interpreter to check as it is (offline),
    instead of ``venv``."""
    offline = python is not None
    python = python or os.path.join(venv, 'bin', 'python')
    parts = gpu_parts(python, figures_path)
    report = {'started': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
              'offline': offline,
              'budget_s': (REQUIREMENTS_SECONDS if offline else
                           INSTALL_SECONDS + (TORCH_SECONDS if with_torch
                                              else 0))
              + STACK_SECONDS + sum(part[1] for part in parts),
              'parts': [], 'figures': {}}
    os.environ.setdefault('CUPY_CACHE_DIR', os.path.join(
        REPO, 'result', 'cupy_kernel_cache'))

    def run_part(name, argv, deadline):
        result = run(name, argv, deadline, report)
        write_report(report, out)
        return result
    deadline = time.time()
    if offline:
        deadline += REQUIREMENTS_SECONDS
        _, output = run_part('requirements', [python, '-c', PROBE.format(
            requirements=REQUIREMENTS)], deadline)
        report['missing'] = [line for line in output.splitlines()
                             if line.startswith(('missing:', 'without:'))]
    else:
        deadline += INSTALL_SECONDS
        ok, _ = run_part('install', ['make', '-s', 'setup-gpu',
                                     'VENV_GPU=' + venv], deadline)
        if ok and with_torch:
            deadline += TORCH_SECONDS
            ok, _ = run_part('install torch', [python, '-m', 'pip',
                                               'install', '-q', TORCH],
                             deadline)
        if not ok:
            return report
    deadline += STACK_SECONDS
    stack_ok, output = run_part(
        'stack', [python, '-m', 'largebatch.cuda_stack', '--allow-no-cudnn'],
        deadline)
    report['stack'] = output.strip().splitlines()[-1] if output else None
    for name, seconds, argv, figures in parts:
        if not stack_ok and name != 'tests':
            continue
        deadline += seconds
        ok, output = run_part(name, argv, deadline)
        if '-m' in argv and argv[argv.index('-m') + 1] == 'pytest':
            report.setdefault('tests', {})[name] = _test_summary(output)
        if ok and figures:
            with open(os.path.join(REPO, figures)) as f:
                report['figures'][name] = json.load(f)
            write_report(report, out)
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--venv', default='.venv-gpu',
                        help='venv of the GPU stack (default: .venv-gpu)')
    parser.add_argument('--torch', action='store_true',
                        help='also install {} for the comparison'.format(
                            TORCH))
    parser.add_argument('--python',
                        help='check this interpreter as it is, installing '
                        'nothing (offline machines)')
    parser.add_argument('--out', default='result/gpu_check.json',
                        help='report (default: result/gpu_check.json)')
    args = parser.parse_args()
    start = time.time()
    out = os.path.join(REPO, args.out)
    figures = os.path.join(os.path.dirname(out), 'gpu_step.json')
    report = check(args.venv, args.torch, figures, out, args.python)
    report['seconds'] = round(time.time() - start, 1)
    write_report(report, out)
    failed = [part['name'] for part in report['parts']
              if part['returncode'] != 0]
    print('== gpu-check: {:.0f} s of {} s; {}; report in {}'.format(
        report['seconds'], report['budget_s'],
        'failed: ' + ', '.join(failed) if failed else 'all parts passed',
        args.out))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()

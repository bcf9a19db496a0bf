#!/usr/bin/env python3
"""The GPU check of ``make gpu-check``: install, stack line, tests, timing.

    python3 benchmarks/gpu_check.py [--venv .venv-gpu] [--torch]
        [--out result/gpu_check.json]
    python3 benchmarks/gpu_check.py --python PYTHON    (offline: installs
                                                         nothing)

From a checkout on a GPU machine it runs, each part within its share of an
8-minute budget (time a part leaves unused passes to the next):

    install    150 s  ``make setup-gpu``: the ``gpu`` extra into the venv
                      (with ``--torch`` also PyTorch 2.3.1, whose CUDA
                      wheels are the extra's pins: +150 s)
    stack       30 s  ``python -m cuda_stack``: the check and the stack line
    tests      150 s  ``pytest -m gpu tests/gpu``
    benchmark  150 s  ``benchmarks/gpu_step.py``: ResNet-50, 224 px, batch
                      32 and 128, float32 and mixed16, Chainer (and PyTorch)
                      images/s

With ``--python`` (``make gpu-check OFFLINE=1 PYTHON=python3``) it installs
nothing and runs the parts in that interpreter: first ``requirements``
(10 s), one line for each package that it lacks, then the others, the
benchmark with 300 s. Where the stack line fails (no CuPy, no GPU) the GPU
tests still run, and skip with the reason; the benchmark does not run. It
writes what each part printed, took and returned, with the figures, to
``--out``. Exit status 1 when a part failed. A part that runs past its
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
BUDGET = [('install', 150), ('stack', 30), ('tests', 150), ('benchmark', 150)]
OFFLINE_BUDGET = [('requirements', 10), ('stack', 30), ('tests', 140),
                  ('benchmark', 300)]
TORCH_SECONDS = 150
BENCHMARK = ['--size', '224', '--batchsizes', '32', '128',
             '--dtypes', 'float32', 'mixed16', '--warmup', '3',
             '--steps', '10']
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
import chainer_compat
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


def check(venv, with_torch, figures_path, python=None):
    """Run the parts in order; return the report. ``python``: the
    interpreter to check as it is (offline), instead of ``venv``."""
    offline = python is not None
    budget = OFFLINE_BUDGET if offline else BUDGET
    report = {'started': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
              'offline': offline,
              'budget_s': sum(s for _, s in budget)
              + (TORCH_SECONDS if with_torch and not offline else 0),
              'parts': []}
    caps = dict(budget)
    deadline = time.time()
    if offline:
        deadline += caps['requirements']
        _, output = run('requirements', [python, '-c', PROBE.format(
            requirements=REQUIREMENTS)], deadline, report)
        report['missing'] = [line for line in output.splitlines()
                             if line.startswith(('missing:', 'without:'))]
    else:
        python = os.path.join(venv, 'bin', 'python')
        deadline += caps['install']
        ok, _ = run('install', ['make', '-s', 'setup-gpu',
                                'VENV_GPU=' + venv], deadline, report)
        if ok and with_torch:
            deadline += TORCH_SECONDS
            ok, _ = run('install torch', [python, '-m', 'pip', 'install',
                                          '-q', TORCH], deadline, report)
        if not ok:
            return report
    deadline += caps['stack']
    stack_ok, output = run('stack', [python, '-m', 'cuda_stack'], deadline,
                           report)
    report['stack'] = output.strip().splitlines()[-1] if output else None
    if not stack_ok and not offline:
        return report
    deadline += caps['tests']
    _, output = run('tests', [python, '-m', 'pytest', '-q', '-rs', '-m', 'gpu',
                              '-p', 'no:cacheprovider', 'tests/gpu'],
                    deadline, report)
    report['tests'] = _test_summary(output)
    if not stack_ok:
        return report
    deadline += caps['benchmark']
    ok, _ = run('benchmark', [python, '-m', 'benchmarks.gpu_step', '--json',
                              figures_path] + BENCHMARK, deadline, report)
    if ok:
        with open(os.path.join(REPO, figures_path)) as f:
            report['benchmark'] = json.load(f)
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
    figures = os.path.join(os.path.dirname(args.out) or '.', 'gpu_step.json')
    report = check(args.venv, args.torch, figures, args.python)
    report['seconds'] = round(time.time() - start, 1)
    os.makedirs(os.path.join(REPO, os.path.dirname(args.out) or '.'),
                exist_ok=True)
    with open(os.path.join(REPO, args.out), 'w') as f:
        json.dump(report, f, indent=2)
    failed = [part['name'] for part in report['parts']
              if part['returncode'] != 0]
    print('== gpu-check: {:.0f} s of {} s; {}; report in {}'.format(
        report['seconds'], report['budget_s'],
        'failed: ' + ', '.join(failed) if failed else 'all parts passed',
        args.out))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()

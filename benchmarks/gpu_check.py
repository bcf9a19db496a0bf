#!/usr/bin/env python3
"""The GPU check of ``make gpu-check``: install, stack line, tests, timing.

    python3 benchmarks/gpu_check.py [--venv .venv-gpu] [--torch]
        [--out result/gpu_check.json]

From a clean checkout on a GPU machine it runs, each part within its share
of an 8-minute budget (time a part leaves unused passes to the next):

    install    150 s  ``make setup-gpu``: the ``gpu`` extra into the venv
                      (with ``--torch`` also PyTorch 2.3.1, whose CUDA
                      wheels are the extra's pins: +150 s)
    stack       30 s  ``python -m cuda_stack``: the check and the stack line
    tests      200 s  ``pytest -m gpu tests/gpu``
    benchmark  100 s  ``benchmarks/gpu_step.py``: ResNet-50, 224 px, fp32,
                      batch 32 and 128, Chainer (and PyTorch) images/s

and writes what each part printed, took and returned, with the figures, to
``--out``. It needs the Python that creates the venv and nothing else; the
parts run in the venv. Exit status 1 when a part failed.
"""
import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH = 'torch==2.3.1'  # the PyTorch whose nvidia-* pins the gpu extra uses
BUDGET = [('install', 150), ('stack', 30), ('tests', 200), ('benchmark', 100)]
TORCH_SECONDS = 150


def run(name, argv, deadline, report):
    """Run ``argv`` in the repository until ``deadline``; record it."""
    start = time.time()
    timeout = max(1., deadline - start)
    print('== {} (at most {:.0f} s): {}'.format(name, timeout,
                                                ' '.join(argv)), flush=True)
    try:
        proc = subprocess.run(argv, cwd=REPO, timeout=timeout,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        output, returncode = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output, returncode = e.output or '', None
        if isinstance(output, bytes):
            output = output.decode(errors='replace')
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


def check(venv, with_torch, figures_path):
    """Run the parts in order; return the report."""
    python = os.path.join(venv, 'bin', 'python')
    report = {'started': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
              'budget_s': sum(s for _, s in BUDGET)
              + (TORCH_SECONDS if with_torch else 0),
              'parts': []}
    deadline = time.time()
    caps = dict(BUDGET)
    deadline += caps['install']
    ok, _ = run('install', ['make', '-s', 'setup-gpu', 'VENV_GPU=' + venv],
                deadline, report)
    if ok and with_torch:
        deadline += TORCH_SECONDS
        ok, _ = run('install torch', [python, '-m', 'pip', 'install', '-q',
                                      TORCH], deadline, report)
    if not ok:
        return report
    deadline += caps['stack']
    ok, output = run('stack', [python, '-m', 'cuda_stack'], deadline, report)
    report['stack'] = output.strip().splitlines()[-1] if output else None
    if not ok:
        return report
    deadline += caps['tests']
    _, output = run('tests', [python, '-m', 'pytest', '-q', '-rs', '-m', 'gpu',
                              'tests/gpu'], deadline, report)
    lines = [line for line in output.splitlines() if ' in ' in line
             and ('passed' in line or 'failed' in line or 'error' in line)]
    report['tests'] = lines[-1].strip('= ') if lines else None
    deadline += caps['benchmark']
    ok, _ = run('benchmark', [python, '-m', 'benchmarks.gpu_step', '--json',
                              figures_path], deadline, report)
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
    parser.add_argument('--out', default='result/gpu_check.json',
                        help='report (default: result/gpu_check.json)')
    args = parser.parse_args()
    start = time.time()
    figures = os.path.join(os.path.dirname(args.out) or '.', 'gpu_step.json')
    report = check(args.venv, args.torch, figures)
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

"""benchmarks/gpu_check.py: its parts run within their budget, in order."""
import json
import os
import sys
import time

from benchmarks import gpu_check


def test_run_records_output_and_status():
    report = {'parts': []}
    ok, output = gpu_check.run('echo', [sys.executable, '-c', 'print(42)'],
                               time.time() + 60, report)
    assert ok and output == '42\n'
    [part] = report['parts']
    assert (part['name'], part['returncode'], part['timed_out']) == (
        'echo', 0, False)


def test_run_stops_a_part_at_its_deadline():
    report = {'parts': []}
    start = time.time()
    ok, _ = gpu_check.run('sleep', [sys.executable, '-c',
                                    'import time; time.sleep(30)'],
                          start + 1, report)
    assert not ok and report['parts'][0]['timed_out']
    assert time.time() - start < 10


def test_a_part_past_its_deadline_ends_with_its_children(tmp_path):
    # pytest's mpiexec and its ranks are the children of a part's process.
    pid_file = tmp_path / 'child.pid'
    script = ('import subprocess, sys, time; '
              'child = subprocess.Popen([sys.executable, "-c", '
              '"import time; time.sleep(60)"]); '
              'open({!r}, "w").write(str(child.pid)); time.sleep(60)'
              .format(str(pid_file)))
    report = {'parts': []}
    start = time.time()
    ok, _ = gpu_check.run('tree', [sys.executable, '-c', script],
                          start + 3, report)
    assert not ok and report['parts'][0]['timed_out']
    child = int(pid_file.read_text())
    for _ in range(50):  # the killed child is reaped by init
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError('the part\'s child still runs')


def test_offline_probe_names_each_missing_package_in_one_line():
    report = {'parts': []}
    requirements = [('numpy', 'NumPy', 'x'),
                    ('no_such_module_x', 'Something', 'pip install it'),
                    ('no_such_module_y', 'Optional', None)]
    ok, output = gpu_check.run('requirements', [
        sys.executable, '-c', gpu_check.PROBE.format(
            requirements=requirements)], time.time() + 60, report)
    assert ok and output.splitlines() == [
        "missing: Something (ModuleNotFoundError: No module named "
        "'no_such_module_x'); pip install it",
        "without: Optional (ModuleNotFoundError: No module named "
        "'no_such_module_y'); the step is timed without it"]


def fake_parts(monkeypatch, figures, failing=()):
    """Replace running a part by recording it and its deadline; a step
    part writes its figures."""
    calls = []

    def run(name, argv, deadline, report):
        calls.append((name, deadline))
        if name.startswith('step'):
            with open(argv[argv.index('--json') + 1], 'w') as f:
                f.write('{"rows": []}')
        ok = name not in failing
        report['parts'].append({'name': name, 'returncode': 0 if ok else 1})
        return ok, 'GPU X (sm_90), ...\n' if name == 'stack' else ''
    monkeypatch.setattr(gpu_check, 'run', run)
    return calls


GPU_PARTS = ['kernels', 'communicator', 'step 32', 'tests', 'demo float32',
             'demo mixed16', 'step 128']


def test_parts_run_in_order_and_pass_on_unused_time(monkeypatch, tmp_path):
    figures = tmp_path / 'figures.json'
    calls = fake_parts(monkeypatch, figures)
    start = time.time()
    out = tmp_path / 'report' / 'gpu_check.json'
    report = gpu_check.check('.venv-gpu', True, str(figures), str(out))
    names = [name for name, _ in calls]
    assert names == ['install', 'install torch', 'stack'] + GPU_PARTS
    budget = [150, 150, 30, 45, 45, 90, 100, 45, 45, 70]
    for (_, deadline), total in zip(
            calls, [sum(budget[:i + 1]) for i in range(len(budget))]):
        assert abs(deadline - start - total) < 5
    assert report['budget_s'] == sum(budget)
    assert report['stack'].startswith('GPU X')
    assert report['figures'] == {'step 32': {'rows': []},
                                 'step 128': {'rows': []}}
    with open(str(out)) as f:
        assert json.load(f) == report


def test_the_kernels_come_before_the_step_and_the_demo_runs_both_dtypes():
    parts = gpu_check.gpu_parts('py', 'result/gpu_step.json')
    argv = dict((name, argv) for name, _, argv, _ in parts)
    assert argv['kernels'][-1] == 'tests/gpu/test_kernels_gpu.py'
    for dtype in ('float32', 'mixed16'):
        demo = argv['demo ' + dtype]
        assert demo[demo.index('--dtype') + 1] == dtype
        assert '--gpu' in demo and '--allow-no-cudnn' in demo
    assert '--no-torch' in argv['step 32']
    assert '--no-torch' not in argv['step 128']
    # offline, 8 minutes: one 10-minute call has 2 for the install
    assert sum(seconds for _, seconds, _, _ in parts) + 30 + 10 == 480


def test_no_gpu_runs_only_the_tests_after_the_stack_line(
        monkeypatch, tmp_path):
    calls = fake_parts(monkeypatch, tmp_path / 'figures.json',
                       failing=('stack',))
    gpu_check.check('.venv-gpu', False, str(tmp_path / 'x.json'),
                    str(tmp_path / 'report.json'))
    assert [name for name, _ in calls] == ['install', 'stack', 'tests']


def test_offline_installs_nothing(monkeypatch, tmp_path):
    figures = tmp_path / 'figures.json'
    calls = fake_parts(monkeypatch, figures)
    report = gpu_check.check('.venv-gpu', False, str(figures),
                             str(tmp_path / 'report.json'), python='python3')
    assert [name for name, _ in calls] == [
        'requirements', 'stack'] + GPU_PARTS
    assert report['offline'] and report['budget_s'] == 480


def test_a_check_cut_short_keeps_the_report_of_the_parts_that_ran(
        monkeypatch, tmp_path):
    """The device call that runs the check can end it at any moment: the
    report on disk has every part that finished, and the figures."""
    calls = fake_parts(monkeypatch, tmp_path / 'figures.json')
    fake_run = gpu_check.run

    def run(name, argv, deadline, report):
        if name == 'tests':
            raise KeyboardInterrupt  # the call's time is up
        return fake_run(name, argv, deadline, report)
    monkeypatch.setattr(gpu_check, 'run', run)
    out = tmp_path / 'report.json'
    try:
        gpu_check.check('.venv-gpu', False, str(tmp_path / 'figures.json'),
                        str(out), python='python3')
    except KeyboardInterrupt:
        pass
    with open(str(out)) as f:
        report = json.load(f)
    assert [part['name'] for part in report['parts']] == [
        name for name, _ in calls] == [
        'requirements', 'stack', 'kernels', 'communicator', 'step 32']
    assert report['figures'] == {'step 32': {'rows': []}}
    assert not [name for name in os.listdir(str(tmp_path))
                if name.endswith('.tmp')]

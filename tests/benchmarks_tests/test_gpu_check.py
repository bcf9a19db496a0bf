"""benchmarks/gpu_check.py: its parts run within their budget, in order."""
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
    """Replace running a part by recording it and its deadline."""
    calls = []

    def run(name, argv, deadline, report):
        calls.append((name, deadline))
        if name == 'benchmark':
            figures.write_text('{"rows": []}')
        ok = name not in failing
        report['parts'].append({'name': name, 'returncode': 0 if ok else 1})
        return ok, 'GPU X (sm_90), ...\n' if name == 'stack' else ''
    monkeypatch.setattr(gpu_check, 'run', run)
    return calls


def test_parts_run_in_order_and_pass_on_unused_time(monkeypatch, tmp_path):
    figures = tmp_path / 'figures.json'
    calls = fake_parts(monkeypatch, figures)
    start = time.time()
    report = gpu_check.check('.venv-gpu', True, str(figures))
    names = [name for name, _ in calls]
    assert names == ['install', 'install torch', 'stack', 'tests',
                     'benchmark']
    budget = [150, 150, 30, 150, 150]
    for (_, deadline), total in zip(
            calls, [sum(budget[:i + 1]) for i in range(5)]):
        assert abs(deadline - start - total) < 5
    assert report['budget_s'] == 630 and report['stack'].startswith('GPU X')
    assert report['benchmark'] == {'rows': []}


def test_no_gpu_stops_after_the_stack_line(monkeypatch, tmp_path):
    calls = fake_parts(monkeypatch, tmp_path / 'figures.json',
                       failing=('stack',))
    report = gpu_check.check('.venv-gpu', False, str(tmp_path / 'x.json'))
    assert [name for name, _ in calls] == ['install', 'stack']
    assert report['budget_s'] == 480


def test_offline_installs_nothing_and_runs_the_tests_without_a_gpu(
        monkeypatch, tmp_path):
    calls = fake_parts(monkeypatch, tmp_path / 'figures.json',
                       failing=('stack',))
    report = gpu_check.check('.venv-gpu', True, str(tmp_path / 'x.json'),
                             python='python3')
    assert [name for name, _ in calls] == ['requirements', 'stack', 'tests']
    assert report['offline'] and report['budget_s'] == 480


def test_offline_runs_the_benchmark_when_the_stack_passes(
        monkeypatch, tmp_path):
    figures = tmp_path / 'figures.json'
    calls = fake_parts(monkeypatch, figures)
    report = gpu_check.check('.venv-gpu', False, str(figures),
                             python='python3')
    assert [name for name, _ in calls] == [
        'requirements', 'stack', 'tests', 'benchmark']
    assert report['benchmark'] == {'rows': []}

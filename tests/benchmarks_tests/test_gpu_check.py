"""benchmarks/gpu_check.py: its parts run within their budget, in order."""
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
    budget = [150, 150, 30, 200, 100]
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

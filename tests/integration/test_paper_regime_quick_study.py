"""studies.paper_regime_study --quick end to end: the lr sweep, every
run at the chosen lr, results.json and the page; a finished run is skipped
and one without its result is collected from its final snapshot."""
import json
import os
import subprocess
import sys

import pytest

from studies import trainer_runs
from studies.paper_regime_study import regime
from studies.paper_regime_study import runner
from image_data import make_demo
from conftest import REPO


@pytest.mark.skipif(not os.path.isdir(make_demo.IDX_DIR),
                    reason='needs Debian\'s dataset-fashion-mnist')
def test_quick_study_runs_skips_and_resumes(tmp_path):
    out, results = str(tmp_path / 'out'), str(tmp_path / 'results')
    page = str(tmp_path / 'page.md')
    cmd = [sys.executable, '-m', 'studies.paper_regime_study', '--quick',
           '--jobs', '2', '--out', out, '--results', results, '--page', page]
    env = dict(os.environ, PYTHONPATH=REPO)

    def run():
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    run()
    with open(os.path.join(results, 'results.json')) as f:
        rows = json.load(f)['runs']
    planned = (regime.sweep_runs(regime.QUICK) +
               runner.runs_at(regime.QUICK, 0.01))
    assert sorted(r['name'] for r in rows) == sorted(r.name for r in planned)
    for row in rows:
        if row['stage'] == 'handover':  # their losses; a trainer that
            # validates its last weights scores them too
            assert row['top1'] is None or 0 <= row['top1'] <= 1
            continue
        assert row['diverged'] or 0 <= row['top1'] <= 1
        # A run that diverged before its first log line has no log.
        assert row['diverged'] or os.path.exists(
            runner.result_path(results, row['name'])[:-5] + '.log.json')
    # each run records the machine its trainer ran on and the kernels
    # pinned there
    machine = trainer_runs.machine()
    pinned = trainer_runs.blas_environment(
        trainer_runs.cpu_info()[1]).get('OPENBLAS_CORETYPE')
    assert all(row['machine'] == machine and row['blas_kernels'] == pinned
               for row in rows)
    text = open(page).read()
    assert '- trained on: {}, OpenBLAS kernels: {}'.format(
        machine, pinned or "the CPU's own") in text
    assert '23 of 23 runs finished' in text
    assert '6 of 6 plateau runs finished' in text
    assert '2 of 2 runs finished. `akiba2017-zero-init` with' in text
    assert ('2 of 2 runs on the paper\'s schedule and 3 of 3 handover runs'
            in text)
    assert all(os.path.getsize(os.path.join(results, name)) > 0
               for name in ('curves.png', 'sweep.png', 'plateau.png',
                            'paper_curves.png', 'handover.png'))

    # A finished run is skipped; one without its result resumes from its
    # final snapshot instead of training again.
    os.remove(runner.result_path(results, 'akiba2017-k4-seed0'))
    stdout = run()
    assert stdout.count(' top-1 ') == 1 and 'akiba2017-k4-seed0' in stdout
    assert 'resuming from' in open(os.path.join(
        out, 'runs', 'akiba2017-k4-seed0', 'train.out')).read()

"""benchmarks.large_batch_study --quick end to end: it trains every
configuration, writes its page, skips finished runs and resumes others."""
import json
import os
import subprocess
import sys

import pytest

from benchmarks import large_batch_study as study
from conftest import REPO


@pytest.mark.skipif(not os.path.isdir(study.make_demo.IDX_DIR),
                    reason='needs Debian\'s dataset-fashion-mnist')
def test_quick_study_runs_skips_and_resumes(tmp_path):
    out = str(tmp_path / 'study')
    cmd = [sys.executable, '-m', 'benchmarks.large_batch_study', '--quick',
           '--jobs', '2', '--out', out]
    env = dict(os.environ, PYTHONPATH=REPO)

    def run():
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=150)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    run()
    for config in study.CONFIGS:
        with open(os.path.join(out, config.name + '-seed0',
                               'result.json')) as f:
            result = json.load(f)
        assert result['curve'][-1][0] == study.QUICK.epochs
        assert 0 <= result['top1'] <= 1
    page = open(os.path.join(out, 'results.md')).read()
    assert all('`{}`'.format(c.name) in page for c in study.CONFIGS)
    assert os.path.getsize(os.path.join(out, 'results.png')) > 0

    # A finished run is skipped; one without its result resumes from its
    # final snapshot instead of training again.
    akiba = os.path.join(out, 'akiba2017-seed0')
    os.remove(os.path.join(akiba, 'result.json'))
    stdout = run()
    assert stdout.count(' seed 0: ') == 1 and 'akiba2017 seed 0' in stdout
    assert 'resuming from' in open(os.path.join(akiba, 'train.out')).read()

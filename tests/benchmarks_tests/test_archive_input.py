import re

import pytest

from benchmarks import archive_input

#: It runs strace on Python processes.
pytestmark = pytest.mark.integration


def test_prints_opens_calls_rates_ratio_and_the_indexers_rate(capsys):
    archive_input.main(['--rounds', '2', '--images', '20',
                        '--members', '3000'])
    out = capsys.readouterr().out
    opens = {form: float(value) for form, value in re.findall(
        r'  (files|archive) +file opens ([\d.]+)', out)}
    if 'strace is not installed' not in out:
        assert opens == {'files': 1, 'archive': 0}
    for form in ('files', 'archive'):
        assert '  {:<8} median'.format(form) in out
    assert 'archive / files: ' in out
    # 3,000 images, 1,000 class tars and 1,000 validation images
    assert re.search(r'indexer: 5,000 tar headers at [\d,]+ a second', out)

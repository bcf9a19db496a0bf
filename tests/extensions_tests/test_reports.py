"""extensions.reports: output without terminal escapes where nobody
watches, and the closing line."""
import io

from extensions import reports


def test_escapes_are_dropped_from_output_nobody_watches():
    out = io.StringIO()
    stream = reports._WithoutEscapes(out)
    for text in ('\033[J', '0   1   3.89\n', '\033[J', '0   2   4.49\n'):
        stream.write(text)
    assert out.getvalue() == '0   1   3.89\n0   2   4.49\n'


def test_nobody_watches_a_file(monkeypatch, tmp_path):
    with open(str(tmp_path / 'out'), 'w') as f:
        monkeypatch.setattr('sys.stdout', f)
        assert not reports.is_watched()

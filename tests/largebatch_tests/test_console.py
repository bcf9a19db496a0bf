"""console: standard output prints a path the locale cannot encode."""
import io
import sys

from largebatch import console


def stream(errors):
    return io.TextIOWrapper(io.BytesIO(), encoding='utf-8', errors=errors)


def test_a_strict_stream_escapes_what_it_cannot_encode(monkeypatch):
    out, err = stream('strict'), stream('surrogateescape')
    monkeypatch.setattr(sys, 'stdout', out)
    monkeypatch.setattr(sys, 'stderr', err)
    console.print_any_text()
    for f in (out, err):
        print('in r/\udcff', file=f, flush=True)
    assert out.buffer.getvalue() == b'in r/\\udcff\n'
    assert err.buffer.getvalue() == b'in r/\xff\n'  # UTF-8 mode's, kept

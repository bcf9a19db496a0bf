"""Lines printed whatever the locale's encoding.

A path whose bytes the locale cannot decode (``--out $'r/\\xff'``) reaches
Python as a surrogate, which a strict standard output (``PYTHONIOENCODING=
utf-8``, a UTF-8 locale outside Python's UTF-8 mode) refuses: the job would
end at its closing line, and at every resume. Such text is printed escaped
instead, as Python's standard error prints it.
"""
import sys


def print_any_text():
    """Standard output and error escape what their encoding cannot encode
    (``\\udcff``) where they would raise; other error handlers (UTF-8
    mode's ``surrogateescape``) are kept."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, 'errors', None) == 'strict' and hasattr(
                stream, 'reconfigure'):
            stream.reconfigure(errors='backslashreplace')

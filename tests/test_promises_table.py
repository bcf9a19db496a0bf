"""docs/reliability.md's table of promises names, for each, tests that
exist: a renamed or removed test leaves no promise without its test."""
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def table_rows():
    with open(os.path.join(REPO, 'docs', 'reliability.md')) as f:
        text = f.read()
    start = text.index('## The promises and the tests that hold them')
    section = text[start:text.index('\n## ', start + 1)]
    return [row.split('|') for row in section.splitlines()
            if row.startswith('| ') and not row.startswith('| **')
            and row.count('|') == 4][1:]


def named_tests(cell):
    """``(file, test or None)`` of each `tests/...` reference in ``cell``;
    ``::name`` alone names a test of the file named before it."""
    current = None
    for ref in re.findall(r'`([^`]+)`', cell):
        path, _, name = ref.partition('::')
        current = path or current
        yield current, name or None


def test_every_promise_names_tests_that_exist():
    rows = table_rows()
    assert len(rows) > 20
    for row in rows:
        tests = list(named_tests(row[3]))
        assert tests, row[1]
        for path, name in tests:
            full = os.path.join(REPO, 'tests', path)
            assert os.path.isfile(full), (row[1], path)
            if name:
                with open(full) as f:
                    assert re.search(r'^def {}\('.format(re.escape(name)),
                                     f.read(), re.MULTILINE), (row[1], name)

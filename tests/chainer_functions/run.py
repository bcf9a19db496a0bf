"""Chainer 7.8.1's own tests of the functions and links the CPU engine
replaces, run against the engine:
``python tests/chainer_functions/run.py [pytest args]``.

Chainer's sdist on PyPI carries no tests, so they come from its v7.8.1
source tree: ``CHAINER_SOURCE`` (a git clone or mirror of chainer/chainer,
a checkout of the tag, or its tag archive), else the tag archive from
GitHub. Only :data:`FILES` (and the packages around them) are unpacked into
``result/chainer-7.8.1/``, each checked against the tag's git blob, and
pytest runs them with :mod:`plugin`, which hands Chainer's functions and
links to the engine.
"""
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [REPO, HERE]

from largebatch import chainer_compat  # NOQA: E402,F401 (before chainer)

TAG = 'v7.8.1'
ARCHIVE = 'https://github.com/chainer/chainer/archive/refs/tags/{}.tar.gz'
DEST = os.path.join(REPO, 'result', 'chainer-7.8.1')
FUNCTIONS = 'tests/chainer_tests/functions_tests/'
LINKS = 'tests/chainer_tests/links_tests/'

#: The test files run, and their git blobs at the tag.
FILES = {
    FUNCTIONS + 'connection_tests/test_convolution_2d.py':
        'ed2de3e7e4faf69760bea2bd63dedf2a296607e4',
    FUNCTIONS + 'normalization_tests/test_batch_normalization.py':
        '63ca58f93621fea2035f3112d350e31deff4a701',
    FUNCTIONS + 'activation_tests/test_relu.py':
        '0be62995cf3ac88b3cbafa2635110f120642f419',
    FUNCTIONS + 'pooling_tests/test_max_pooling_2d.py':
        '392c2e2b4975727267ec8a5650651f1e7f49ba5c',
    LINKS + 'connection_tests/test_convolution_2d.py':
        '5bce11bc3a18f7a970b011204b31f97f07c819ed',
    LINKS + 'normalization_tests/test_batch_normalization.py':
        'b4bf70ae5ec5320ba58409c9a01267828e3102db',
}
#: What the test files import beside Chainer.
HELPERS = {
    FUNCTIONS + 'pooling_tests/pooling_nd_helper.py':
        '5e9fcfeaaf1716e4b7eed8a8c7bc6ed6d7a3e246',
}


def _wanted(path):
    """Whether ``path`` (relative to the source tree) is unpacked: the
    files above and the ``__init__.py`` of the packages holding them."""
    if path in FILES or path in HELPERS:
        return True
    if os.path.basename(path) != '__init__.py':
        return False
    package = os.path.dirname(path) + '/'
    return any(f.startswith(package) for f in FILES)


def _git_blob(data):
    return hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest()


def _archive(source):
    """The tag's source tree as an open tarfile (members may sit under a
    top folder), from ``source`` or GitHub."""
    if source and os.path.isdir(source):
        if os.path.isdir(os.path.join(source, FUNCTIONS)):
            return None  # a checkout: read in place
        data = subprocess.run(
            ['git', '--git-dir', source, 'archive', '--format=tar', TAG,
             'tests/chainer_tests'], check=True,
            stdout=subprocess.PIPE).stdout
        return tarfile.open(fileobj=io.BytesIO(data))
    if not source:
        source = DEST + '.tar.gz'
        if not os.path.exists(source):
            print('downloading', ARCHIVE.format(TAG), flush=True)
            with urllib.request.urlopen(ARCHIVE.format(TAG),
                                        timeout=120) as r:
                data = r.read()
            with open(source + '.part', 'wb') as f:
                f.write(data)
            os.replace(source + '.part', source)
    return tarfile.open(source)


def _members(source):
    """``(path in the tree, bytes)`` of the wanted files."""
    archive = _archive(source)
    if archive is None:
        for root, _, names in os.walk(os.path.join(source, 'tests')):
            for name in names:
                full = os.path.join(root, name)
                path = os.path.relpath(full, source).replace(os.sep, '/')
                if _wanted(path):
                    with open(full, 'rb') as f:
                        yield path, f.read()
        return
    with archive:
        for member in archive.getmembers():
            path = member.name
            if not path.startswith('tests/'):  # GitHub's chainer-7.8.1/
                path = path.partition('/')[2]
            if member.isfile() and _wanted(path):
                yield path, archive.extractfile(member).read()


def unpack():
    """The folder holding Chainer's ``tests/``, unpacked once for the
    files wanted (``.complete`` lists their blobs)."""
    done = os.path.join(DEST, '.complete')
    blobs = ''.join(sorted(
        blob + '\n' for blob in {**FILES, **HELPERS}.values()))
    if os.path.exists(done):
        with open(done) as f:
            if f.read() == blobs:
                return DEST
    source = os.environ.get('CHAINER_SOURCE')
    found = set()
    for path, data in _members(source):
        want = FILES.get(path) or HELPERS.get(path)
        if want and _git_blob(data) != want:
            sys.exit('{} in {} is not Chainer {}\'s'.format(
                path, source or ARCHIVE.format(TAG), TAG))
        out = os.path.join(DEST, path)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, 'wb') as f:
            f.write(data)
        found.add(path)
    missing = sorted((set(FILES) | set(HELPERS)) - found)
    if missing:
        sys.exit('{} lacks {}'.format(source or ARCHIVE.format(TAG),
                                      ', '.join(missing)))
    with open(done, 'w') as f:
        f.write(blobs)
    return DEST


def main(argv):
    import pytest

    import plugin

    root = unpack()
    os.chdir(root)
    return pytest.main(
        ['-q', '-p', 'no:cacheprovider', '--rootdir', root]
        + sorted(FILES) + list(argv), plugins=[plugin])


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

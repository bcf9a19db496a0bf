"""chainer_compat: Chainer 7.8.1 imports on NumPy 2, Python 3.12 and a
setuptools without pkg_resources, and nothing changes where all is there."""
import importlib.metadata
import subprocess
import sys
import textwrap

import numpy
import pytest

from largebatch import chainer_compat

NUMPY_2 = int(numpy.__version__.split('.')[0]) >= 2


def test_sctypes_is_restored_on_numpy_2_only():
    assert ('numpy.sctypes' in chainer_compat.RESTORED) == NUMPY_2
    assert numpy.sctypes['int'][-1] is numpy.int64


@pytest.mark.skipif(NUMPY_2, reason='NumPy 2 has no sctypes to compare with')
def test_restored_sctypes_equal_numpy_1s():
    assert chainer_compat._sctypes() == numpy.sctypes


def test_a_second_restore_restores_nothing():
    assert chainer_compat.restore() == []


def test_chainer_imports_and_runs_without_all_three():
    # A fresh interpreter in which numpy.sctypes, numpy.distutils and
    # pkg_resources are all gone, as on Python 3.12 with NumPy 2 and
    # setuptools >= 82.
    script = textwrap.dedent('''
        import sys
        import numpy

        class Gone(object):
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] == 'pkg_resources' or \\
                        name.startswith('numpy.distutils'):
                    raise ImportError('gone: ' + name)

        sys.meta_path.insert(0, Gone())
        if 'sctypes' in vars(numpy):
            del numpy.sctypes
        from largebatch import chainer_compat
        print(sorted(chainer_compat.RESTORED))
        import chainer
        import chainer.functions as F
        import chainermn  # NOQA
        x = numpy.arange(6, dtype=numpy.float32)
        print(F.as_strided(x, (2, 2), (2, 1)).array.tolist())  # in items
        import pkg_resources
        print(pkg_resources.require('numpy>=1.22,<3')[0].project_name)
    ''')
    proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "['numpy.distutils.system_info', 'numpy.sctypes', 'pkg_resources']",
        '[[0.0, 1.0], [2.0, 3.0]]', 'numpy']


@pytest.fixture
def pkg_resources(monkeypatch):
    versions = {'cupy': '13.6.0', 'cupy-cuda102': '7.8.0',
                'ideep4py': '2.0.0.post3'}

    def version(name):
        if name not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]
    monkeypatch.setattr(importlib.metadata, 'version', version)
    return chainer_compat._pkg_resources()


def test_require_answers_chainers_checks_as_setuptools_did(pkg_resources):
    # chainer._environment_check: require('<package><specifier>') for each
    # CuPy and iDeep name, then get_distribution(package).version.
    with pytest.raises(pkg_resources.VersionConflict):
        pkg_resources.require('cupy>=7.7.0,<8.0.0')
    assert pkg_resources.get_distribution('cupy').version == '13.6.0'
    assert pkg_resources.require('cupy-cuda102>=7.7.0,<8.0.0')
    assert pkg_resources.require('ideep4py>=2.0.0.post3, <2.1')
    assert pkg_resources.require('cupy')
    with pytest.raises(pkg_resources.DistributionNotFound):
        pkg_resources.require('cupy-cuda120>=7.7.0,<8.0.0')
    assert issubclass(pkg_resources.DistributionNotFound,
                      pkg_resources.ResolutionError)


def test_versions_compare_by_their_release_numbers():
    assert chainer_compat._release('13.6.0rc1') == (13, 6, 0)
    assert chainer_compat._compare((8,), (8, 0, 0)) == 0
    assert chainer_compat._compare((13, 6, 0), (8, 0, 0)) == 1
    assert chainer_compat._compare((7, 10), (7, 7, 0)) == 1

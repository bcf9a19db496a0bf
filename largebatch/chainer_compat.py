"""What Chainer 7.8.1 reads at import that today's NumPy and setuptools lack.

Every entry point imports this module before ``chainer``::

    from largebatch import chainer_compat  # NOQA: F401 (before chainer)
    import chainer

and in the project's venv an import hook does it for any ``import chainer``
(:mod:`largebatch.chainer_hook`).

It puts back three names, each only where it is missing, so on the releases
Chainer was written for (NumPy < 1.24, Python <= 3.11, setuptools < 82) it
does nothing:

``numpy.sctypes``
    Removed in NumPy 2.0 (NEP 52). ``import chainer`` reads
    ``sctypes['int']`` and ``sctypes['float']`` in
    ``chainer.functions.array.as_strided``. Restored as the dict NumPy
    1.26 has on 64-bit Linux and macOS, built from the same scalar types.
``numpy.distutils.system_info``
    ``numpy.distutils`` does not exist on Python >= 3.12 (NumPy 1.26 and
    2.x). ``chainer._environment_check`` imports it at ``import chainer``
    and calls ``system_info.get_info('blas_opt')`` on macOS only, to warn
    about Accelerate. The stand-in's ``get_info`` returns ``{}``, what
    ``numpy.distutils`` returns for a BLAS it cannot describe: that macOS
    warning is the one thing it does not give.
``pkg_resources``
    Part of setuptools until 81; setuptools 82 removed it, and a Python >=
    3.12 venv starts without setuptools. ``chainer._environment_check``
    imports it at ``import chainer`` and calls ``require('pkg<spec>')`` to
    warn about a CuPy or iDeep of a version Chainer 7.8.1 does not know.
    The stand-in answers those calls from ``importlib.metadata``, comparing
    the numeric release parts of versions (``13.6.0 < 8.0.0`` is False as
    before; pre- and post-release tags are not compared).

``numpy.float``, gone since NumPy 1.24, is left out: of Chainer 7.8.1 only
``F.resize_images`` reads it, and this project does not call it.
"""
import importlib.metadata
import re
import sys
import types

import numpy


def _sctypes():
    """NumPy 1.26's ``numpy.sctypes`` (64-bit Linux and macOS)."""
    return {
        'int': [numpy.int8, numpy.int16, numpy.int32, numpy.int64],
        'uint': [numpy.uint8, numpy.uint16, numpy.uint32, numpy.uint64],
        'float': [numpy.float16, numpy.float32, numpy.float64,
                  numpy.longdouble],
        'complex': [numpy.complex64, numpy.complex128, numpy.clongdouble],
        'others': [bool, object, bytes, str, numpy.void],
    }


def _numpy_distutils():
    """Modules ``numpy.distutils`` and ``numpy.distutils.system_info``."""
    package = types.ModuleType('numpy.distutils')
    package.__path__ = []
    package.__doc__ = 'Stand-in of chainer_compat: only system_info.get_info.'
    system_info = types.ModuleType('numpy.distutils.system_info')

    def get_info(name, notfound_action=0):
        """No information about ``name``: ``{}``."""
        return {}
    system_info.get_info = get_info
    package.system_info = system_info
    return package, system_info


_REQUIREMENT = re.compile(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$')
_CLAUSE = re.compile(r'\s*(==|!=|<=|>=|<|>)\s*([^\s,]+)\s*$')


def _release(version):
    """``'13.6.0rc1'`` -> ``(13, 6, 0)``: the numeric release part."""
    match = re.match(r'\s*v?(\d+(?:\.\d+)*)', version)
    return tuple(int(part) for part in match.group(1).split('.')) \
        if match else ()


def _compare(a, b):
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


_OPERATORS = {'==': lambda c: c == 0, '!=': lambda c: c != 0,
              '<=': lambda c: c <= 0, '>=': lambda c: c >= 0,
              '<': lambda c: c < 0, '>': lambda c: c > 0}


def satisfies(version, specifier):
    """Whether ``version`` meets every clause of ``specifier``
    (``'>=2.0,<2.6'``), by release numbers; ValueError if one is not
    ``<op><version>``."""
    release = _release(version)
    for clause in filter(None, specifier.split(',')):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError('not a version clause: {!r}'.format(clause))
        op, bound = match.groups()
        if not _OPERATORS[op](_compare(release, _release(bound))):
            return False
    return True


def _pkg_resources():
    """A ``pkg_resources`` with what ``chainer._environment_check`` calls."""
    module = types.ModuleType('pkg_resources')
    module.__doc__ = ('Stand-in of chainer_compat: require, get_distribution '
                      'and their errors, from importlib.metadata.')

    class ResolutionError(Exception):
        pass

    class DistributionNotFound(ResolutionError):
        pass

    class VersionConflict(ResolutionError):
        pass

    class Distribution(object):
        def __init__(self, project_name, version):
            self.project_name = project_name
            self.version = version

    def get_distribution(name):
        try:
            return Distribution(name, importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            raise DistributionNotFound(name)

    def require(requirement):
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise ValueError('not a requirement: {!r}'.format(requirement))
        name, specifier = match.groups()
        distribution = get_distribution(name)
        if not satisfies(distribution.version, specifier):
            raise VersionConflict(distribution, requirement)
        return [distribution]

    for value in (ResolutionError, DistributionNotFound, VersionConflict,
                  Distribution, get_distribution, require):
        value.__module__ = 'pkg_resources'
        setattr(module, value.__name__, value)
    return module


def _importable(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def restore():
    """Put back what is missing; return the names restored, e.g.
    ``['numpy.sctypes']``. Calling it again restores nothing."""
    restored = []
    try:
        numpy.sctypes
    except AttributeError:
        numpy.sctypes = _sctypes()
        restored.append('numpy.sctypes')
    if not _importable('numpy.distutils.system_info'):
        package, system_info = _numpy_distutils()
        sys.modules['numpy.distutils'] = package
        sys.modules['numpy.distutils.system_info'] = system_info
        numpy.distutils = package
        restored.append('numpy.distutils.system_info')
    if not _importable('pkg_resources'):
        sys.modules['pkg_resources'] = _pkg_resources()
        restored.append('pkg_resources')
    return restored


RESTORED = restore()

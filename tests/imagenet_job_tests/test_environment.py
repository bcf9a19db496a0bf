"""imagenet_job.environment: what MPI cannot start with is one line naming
the variable; a HOME that cannot be written moves the caches."""
import errno
import os
import tempfile
import warnings

import pytest

from imagenet_job import environment
from largebatch import launchers


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A clean environment: no launcher, HOME and TMPDIR writable."""
    for name in (launchers.LAUNCHED + launchers.RANK_VARIABLES +
                 environment.TEMPORARY_VARIABLES +
                 tuple(environment.CACHE_VARIABLES)):
        monkeypatch.delenv(name, raising=False)
    for name in ('home', 'tmp'):
        (tmp_path / name).mkdir()
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('TMPDIR', str(tmp_path / 'tmp'))
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'tmp'))
    return monkeypatch


def check(launched=False):
    with pytest.raises(environment.BadEnvironment) as info:
        environment.check_environment(launched)
    return str(info.value)


def test_a_good_environment_passes_and_leaves_nothing(env, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        environment.check_environment(False)
    assert os.listdir(str(tmp_path / 'home')) == []
    assert os.listdir(str(tmp_path / 'tmp')) == []
    assert 'MPLCONFIGDIR' not in os.environ


def test_a_rank_variable_without_a_rank(env):
    env.setenv('SLURM_PROCID', 'abc')
    assert check().startswith('SLURM_PROCID=abc: not a rank ')


@pytest.mark.parametrize('home', [None, ''])
def test_home_unset(env, home):
    if home is None:
        env.delenv('HOME')
    else:
        env.setenv('HOME', home)
    assert check(launched=True) == (
        'HOME is not set, and Open MPI does not start without it; set HOME '
        'to your home directory')


@pytest.mark.parametrize('name', environment.TEMPORARY_VARIABLES)
def test_a_temporary_directory_that_does_not_exist(env, tmp_path, name):
    env.delenv('TMPDIR')
    env.setenv(name, str(tmp_path / 'none'))
    assert check() == (
        '{}={}: not a writable directory (No such file or directory); Open '
        'MPI keeps its session directory there: set TMPDIR to one'.format(
            name, tmp_path / 'none'))
    assert not (tmp_path / 'none').exists()


def test_a_temporary_directory_that_is_a_file(env, tmp_path):
    (tmp_path / 'file').write_text('kept')
    env.setenv('TMPDIR', str(tmp_path / 'file'))
    assert '(Not a directory)' in check()
    assert (tmp_path / 'file').read_text() == 'kept'


def test_a_full_temporary_directory(env):
    def full(**kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    env.setattr(tempfile, 'mkdtemp', full)
    assert '(No space left on device)' in check()


def test_launched_workers_use_their_launchers_session_directory(env,
                                                                tmp_path):
    env.setenv('TMPDIR', str(tmp_path / 'none'))
    environment.check_environment(True)


def test_a_home_that_cannot_be_written_moves_the_caches(env, tmp_path):
    env.setenv('HOME', str(tmp_path / 'none'))
    env.setenv('CUPY_CACHE_DIR', str(tmp_path / 'cupy'))
    with pytest.warns(UserWarning) as record:
        environment.check_environment(False)
    assert [str(w.message) for w in record] == [
        'HOME={}: not a writable directory (No such file or directory); '
        'matplotlib\'s and CuPy\'s caches are temporary in this run: set '
        'HOME, or CUPY_CACHE_DIR and MPLCONFIGDIR, to writable directories '
        'to keep them'.format(tmp_path / 'none')]
    assert os.path.dirname(os.path.dirname(os.environ['MPLCONFIGDIR'])) == \
        str(tmp_path / 'tmp')
    assert os.environ['CUPY_CACHE_DIR'] == str(tmp_path / 'cupy')  # kept
    assert not (tmp_path / 'none').exists()


def test_only_rank_0_warns(env, tmp_path):
    env.setenv('HOME', str(tmp_path / 'none'))
    env.setenv('PMI_RANK', '1')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        environment.check_environment(True)
    assert os.environ['MPLCONFIGDIR'].endswith('matplotlib')

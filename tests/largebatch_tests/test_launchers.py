"""launchers: a launcher's variables, and none."""
import pytest

from largebatch import launchers
from largebatch.errors import InputError


def clear(monkeypatch):
    for name in launchers.LAUNCHED + launchers.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_no_launcher_is_rank_0(monkeypatch):
    clear(monkeypatch)
    assert not launchers.launched()
    assert launchers.rank() == 0


def test_the_mpi_launchers_rank_before_sruns(monkeypatch):
    clear(monkeypatch)
    monkeypatch.setenv('SLURM_PROCID', '3')
    assert launchers.rank() == 3 and not launchers.launched()
    monkeypatch.setenv('OMPI_COMM_WORLD_SIZE', '4')
    monkeypatch.setenv('OMPI_COMM_WORLD_RANK', '1')
    assert launchers.rank() == 1 and launchers.launched()


@pytest.mark.parametrize('name, value', [
    ('SLURM_PROCID', 'abc'), ('OMPI_COMM_WORLD_RANK', 'x'),
    ('PMI_RANK', '-1'), ('PMIX_RANK', '')])
def test_a_rank_variable_that_holds_no_rank_is_named(monkeypatch, name,
                                                     value):
    clear(monkeypatch)
    monkeypatch.setenv(name, value)
    with pytest.raises(InputError, match='^{}={}: not a rank '.format(
            name, value)):
        launchers.rank()

"""launchers: a launcher's variables, and none."""
from largebatch import launchers


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

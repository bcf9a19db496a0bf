"""Final-batch BN statistics synced over real `mpiexec` jobs: the function,
the trainer extension, and train_imagenet.py's snapshots."""
import pytest


@pytest.mark.parametrize('n_workers', [2, 3, 4])
def test_sync_averages_statistics_over_workers(mpirun, n_workers):
    proc = mpirun(n_workers, ['tests/mpi_scripts/bn_sync.py'])
    lines = proc.stdout.splitlines()
    for check in ('ok average', 'ok readings', 'ok test mode',
                  'ok link sync'):
        assert lines.count(check) == n_workers, (check, proc.stdout)


def test_extension_syncs_before_evaluation_snapshot_and_end(mpirun,
                                                            tmp_path):
    proc = mpirun(2, ['tests/mpi_scripts/bn_trainer_sync.py',
                      str(tmp_path)])
    lines = proc.stdout.splitlines()
    assert lines.count('ok synced iterations') == 2
    assert lines.count('ok snapshot') == 1


def test_train_imagenet_snapshot_holds_synced_statistics(mpirun, tmp_path):
    proc = mpirun(2, ['tests/mpi_scripts/bn_train_imagenet.py',
                      str(tmp_path / 'out'), '--demo', '--test',
                      '--iterations', '1', '--loaderjob', '0',
                      '--batchsize', '4', '--accumulate', '2',
                      '--val_batchsize', '16', '--bn-variance', 'union'])
    # PrintReport's terminal codes may precede a line: count substrings.
    assert proc.stdout.count('ok synced') == 2
    assert proc.stdout.count('ok snapshot') == 1
    assert proc.stdout.count('ok model') == 1

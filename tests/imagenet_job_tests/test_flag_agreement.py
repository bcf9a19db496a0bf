"""imagenet_job.flag_agreement: every worker has rank 0's flags and files,
with a stand-in for MPI."""
import os

import numpy
import pytest

from fake_comm import FakeComm
from imagenet_job import arguments
from imagenet_job import flag_agreement
from imagenet_job.agreement import JobInputError
from largebatch.errors import InputError


class BroadcastingComm(FakeComm):
    """A :class:`FakeComm` whose ``bcast`` hands rank 0's value out."""

    def bcast(self, value, root=0):
        return value if self.rank == root else self.roots_value


def comm_of(rank, rank_0_argv):
    comm = BroadcastingComm(rank, [None])
    comm.roots_value = flag_agreement.settings_of(
        arguments.parse(rank_0_argv))
    return comm


def test_the_same_flags_agree():
    argv = ['--demo', '--lr', '0.1']
    flag_agreement.agree_on_settings(comm_of(1, argv), arguments.parse(argv))


def test_a_differing_flag_is_named_with_both_values():
    with pytest.raises(JobInputError, match=(
            r'^--lr differs between workers: 0.1 on rank 0, 5.0 on rank 1; '
            r'start every worker with the same flags$')):
        flag_agreement.agree_on_settings(
            comm_of(1, ['--demo', '--lr', '0.1']),
            arguments.parse(['--demo', '--lr', '5']))


def test_a_flag_given_on_one_worker_only():
    with pytest.raises(JobInputError, match=(
            r'^--val-batchsize differs between workers: 250 on rank 0, 8 on '
            r'rank 1;')):
        flag_agreement.agree_on_settings(
            comm_of(1, ['--demo']),
            arguments.parse(['--demo', '--val_batchsize', '8']))
    with pytest.raises(JobInputError, match=(
            r'^--mean differs between workers: unset on rank 0, m.npy on')):
        flag_agreement.agree_on_settings(
            comm_of(1, ['--demo']),
            arguments.parse(['--demo', '--mean', 'm.npy']))


def test_each_worker_may_have_its_own_gpu():
    flag_agreement.agree_on_settings(
        comm_of(1, ['--demo', '--device', '@cupy:0']),
        arguments.parse(['--demo', '--device', '@cupy:1']))


def test_a_file_that_differs_is_named_with_its_flag(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    numpy.save('mean.npy', numpy.array([100, 110, 120], 'f'))
    argv = ['--demo', '--mean', 'mean.npy']
    comm = comm_of(1, argv)
    numpy.save('mean.npy', numpy.array([100, 110, 121], 'f'))
    with pytest.raises(JobInputError) as info:
        flag_agreement.agree_on_settings(comm, arguments.parse(argv))
    first = comm.roots_value[1]['--mean']
    second = flag_agreement.fingerprint('mean.npy')
    assert first != second
    assert str(info.value) == (
        '--mean mean.npy differs between workers: {} on rank 0, {} on rank '
        '1; give every worker the same file'.format(first, second))


def test_the_files_every_worker_reads_are_fingerprinted(tmp_path):
    paths = {}
    for name in ('mean.npy', 'init.npz', 'snapshot_iter_5', 'train.npz',
                 'val.npz'):
        paths[name] = str(tmp_path / name)
        with open(paths[name], 'w') as f:
            f.write(name)
    flags, files = flag_agreement.settings_of(arguments.parse([
        paths['train.npz'], paths['val.npz'], '--mean', paths['mean.npy'],
        '--initmodel', paths['init.npz'], '--resume',
        paths['snapshot_iter_5']]))
    assert flags['train'] == paths['train.npz'] and flags['--lr'] is None
    assert '--device' not in flags
    assert files == {flag: flag_agreement.fingerprint(paths[name])
                     for flag, name in (
                         ('--mean', 'mean.npy'), ('--initmodel', 'init.npz'),
                         ('--resume', 'snapshot_iter_5'),
                         ('train', 'train.npz'), ('val', 'val.npz'))}


def test_data_sets_that_rank_0_reads_and_resume_auto_are_not_read():
    assert flag_agreement.settings_of(arguments.parse(
        ['--demo', '--resume', 'auto']))[1] == {}


def test_a_fingerprint_is_the_size_and_the_ends_hash(tmp_path):
    path = str(tmp_path / 'model.npz')
    data = bytearray(os.urandom(3 * 1024))
    with open(path, 'wb') as f:
        f.write(data)
    one = flag_agreement.fingerprint(path, end_bytes=1024)
    assert one.startswith('3,072 bytes sha256:')
    for at in (0, len(data) - 1):  # a change at either end
        changed = bytearray(data)
        changed[at] ^= 1
        with open(path, 'wb') as f:
            f.write(changed)
        assert flag_agreement.fingerprint(path, end_bytes=1024) != one
    with open(path, 'ab') as f:
        f.write(b'x')
    assert flag_agreement.fingerprint(path, end_bytes=1024).startswith(
        '3,073 bytes')


def test_what_is_no_regular_file_is_not_read(tmp_path):
    fifo = str(tmp_path / 'fifo')
    os.mkfifo(fifo)  # an open() for reading without a writer would block
    assert flag_agreement.fingerprint(fifo) == 'not a regular file'
    assert flag_agreement.fingerprint(str(tmp_path)) == (
        'unreadable (Is a directory)')
    assert flag_agreement.fingerprint(str(tmp_path / 'none')) == (
        'unreadable (No such file or directory)')


def test_check_same_names_the_first_differing_flag_before_files():
    reference = ({'--lr': 0.1, '--mean': 'm.npy'}, {'--mean': 'a'})
    mine = ({'--lr': 5.0, '--mean': 'm.npy'}, {'--mean': 'b'})
    with pytest.raises(InputError, match='^--lr differs'):
        flag_agreement.check_same(mine, reference, 3)
    with pytest.raises(InputError, match=(
            '^--mean m.npy differs between workers: a on rank 0, b on rank '
            '3; ')):
        flag_agreement.check_same(({'--lr': 0.1, '--mean': 'm.npy'},
                                   {'--mean': 'b'}), reference, 3)
    with pytest.raises(InputError, match=(
            r'^--new differs between workers: \(no such flag\) on rank 0, 1 '
            r'on rank 2;')):
        flag_agreement.check_same(({'--new': 1}, {}), ({}, {}), 2)

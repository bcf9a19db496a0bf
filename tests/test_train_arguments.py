"""ChainerMN's ImageNet example's flags mean the same here."""
import pytest

from communicators.factory import create_communicator
import train_imagenet


def test_chainermn_examples_flags_are_accepted():
    args = train_imagenet.parse_args(
        ['train.txt', 'val.txt', '-a', 'resnet50', '-B', '4', '-E', '2',
         '--initmodel', 'm.npz', '-j', '1', '-m', 'mean.npy', '-r', 's',
         '-o', 'out', '-R', 'root', '-b', '5', '--test', '--communicator',
         'pure_nccl'])
    assert (args.train, args.val, args.arch, args.batchsize, args.epoch,
            args.initmodel, args.loaderjob, args.mean, args.resume, args.out,
            args.root, args.val_batchsize, args.test, args.communicator) == (
        'train.txt', 'val.txt', 'resnet50', 4, 2, 'm.npz', 1, 'mean.npy',
        's', 'out', 'root', 5, True, 'pure_nccl')
    assert train_imagenet.parse_args(
        ['--demo', '--val-batchsize', '7']).val_batchsize == 7


def test_a_communicator_chainermn_7_removed_names_its_replacement():
    with pytest.raises(ValueError, match="unknown communicator "
                       "'hierarchical'.*ChainerMN 7 removed it: pure_nccl"):
        create_communicator('hierarchical')

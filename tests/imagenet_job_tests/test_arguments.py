"""The training script's command line: ChainerMN's ImageNet example's
flags mean the same here; the defaults that depend on other flags; the
checks argparse cannot make; the recipe the flags resolve to."""
import pytest

from communicators.factory import create_communicator
from largebatch import errors
from image_data import demo
from optimizers import recipes
from imagenet_job import arguments


def test_chainermn_examples_flags_are_accepted():
    args = arguments.parse(
        ['train.txt', 'val.txt', '-a', 'resnet50', '-B', '4', '-E', '2',
         '--initmodel', 'm.npz', '-j', '1', '-m', 'mean.npy', '-r', 's',
         '-o', 'out', '-R', 'root', '-b', '5', '--test', '--communicator',
         'pure_nccl'])
    assert (args.train, args.val, args.arch, args.batchsize, args.epoch,
            args.initmodel, args.loaderjob, args.mean, args.resume, args.out,
            args.root, args.val_batchsize, args.test, args.communicator) == (
        'train.txt', 'val.txt', 'resnet50', 4, 2, 'm.npz', 1, 'mean.npy',
        's', 'out', 'root', 5, True, 'pure_nccl')
    assert arguments.parse(
        ['--demo', '--val-batchsize', '7']).val_batchsize == 7


def test_a_communicator_chainermn_7_removed_names_its_replacement():
    with pytest.raises(ValueError, match="unknown communicator "
                       "'hierarchical'.*ChainerMN 7 removed it: pure_nccl"):
        create_communicator('hierarchical')


def test_the_demo_and_its_defaults_without_data_sets():
    args = arguments.parse([])
    assert (args.demo, args.train, args.val, args.epoch, args.crop_size,
            args.resize) == (True, demo.TRAIN_DIR, demo.VAL_DIR, 3,
                             demo.CROP_SIZE, 37)
    args = arguments.parse(['t.txt', 'v.txt'])
    assert (args.demo, args.epoch, args.crop_size, args.resize) == (
        False, 90, 224, 256)
    args = arguments.parse(['--test', '--iterations', '3'])
    assert (args.log_interval, args.iterations) == (1, 3)


@pytest.mark.parametrize('argv', [['t.txt'], ['--demo', 't.txt', 'v.txt']])
def test_one_data_set_or_demo_with_data_sets_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as e:
        arguments.parse(argv)
    assert e.value.code == 2
    assert 'give the training and validation sets, or --demo' in \
        capsys.readouterr().err


@pytest.mark.parametrize('argv, name, expected', [
    (['--batchsize', '0'], 'batchsize', 'positive'),
    (['--lr', 'nan'], 'lr', 'finite'),
    (['--crop-size', '40', '--resize', '36'], 'crop_size',
     'at most --resize (36)'),
    (['--accumulate', '0'], 'accumulate', 'positive or auto'),
    (['--device', '@cupy'], 'device', '@cupy:N, @numpy or -1 (CPU)'),
    (['--seed', '-1'], 'seed', 'in [0, 2**32)'),
    (['--stall-timeout', '-3'], 'stall_timeout', 'non-negative (0: never)'),
])
def test_check_names_the_first_bad_value(argv, name, expected):
    args = arguments.parse(argv)
    with pytest.raises(errors.ParameterError) as e:
        arguments.check(args)
    assert (e.value.name, e.value.expected) == (name, expected)


def test_the_defaults_pass_the_check():
    arguments.check(arguments.parse([]))
    arguments.check(arguments.parse(['--accumulate', 'auto']))


def test_the_recipe_applies_exactly_the_flags_given():
    args = arguments.parse(['--recipe', 'goyal2017', '--lr', '0.2',
                            '--no-zero-init-residual'])
    assert arguments.recipe_of(args, args.epoch) == recipes.resolve(
        'goyal2017', 3, lr=0.2, zero_init_residual=False)

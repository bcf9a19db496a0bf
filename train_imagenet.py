#!/usr/bin/env python
"""Data-parallel ResNet-50 training on ImageNet with Chainer and ChainerMN.

    mpiexec -n 1024 python train_imagenet.py train.txt val.txt --root DIR --gpu

runs the recipe of Akiba, Suzuki & Fukuda (2017), "Extremely Large Minibatch
SGD: Training ResNet-50 on ImageNet in 15 Minutes". ``train`` and ``val`` are
Chainer list files (``path label`` per line, relative to ``--root``) or
class-folder directories; with neither (or ``--demo``) it trains on the
embedded Fashion-MNIST subset.
"""
import argparse
import functools
import multiprocessing
import os
import sys
import traceback

import chainer
import chainer.links as L
from chainer import training
from chainer.training import extensions as chainer_extensions
import chainermn
import numpy

import communicators
from communicators import NonFiniteGradientError
import datasets
from datasets import demo
import extensions
from extensions import snapshots
from functions import cpu_runtime
import models
from optimizers import NonFiniteGradientGuard
from optimizers import recipes
import updaters


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Extremely large minibatch ResNet-50 training '
                    '(Akiba et al. 2017) with ChainerMN')
    parser.add_argument('train', nargs='?',
                        help='training list file or class-folder directory')
    parser.add_argument('val', nargs='?',
                        help='validation list file or class-folder directory')
    parser.add_argument('--demo', action='store_true',
                        help='train on the embedded Fashion-MNIST subset')
    parser.add_argument('--root', default='.',
                        help='root directory of the paths in list files')
    parser.add_argument('--arch', '-a', choices=sorted(models.archs),
                        default='resnet50', help='network architecture')
    parser.add_argument('--width', type=float, default=1.0,
                        help='channel-width multiplier of the network, for '
                             'small-scale studies (default: 1, the paper\'s '
                             'ResNet-50)')
    parser.add_argument('--n-class', type=int,
                        help='number of classes (default: the number of '
                             'class folders, or 1000 for list files)')
    parser.add_argument('--batchsize', '-B', type=int, default=32,
                        help='minibatch size per worker (per micro-batch)')
    parser.add_argument('--accumulate', type=int, default=1,
                        help='micro-batches per worker per update (virtual '
                             'workers: each is normalized on its own)')
    parser.add_argument('--val_batchsize', '-b', type=int, default=250,
                        help='validation minibatch size per worker')
    parser.add_argument('--epoch', '-E', type=int,
                        help='epochs to train (default 90; 3 with --demo)')
    parser.add_argument('--iterations', type=int,
                        help='stop after this many iterations instead')
    parser.add_argument('--crop-size', type=int,
                        help='side of the training/validation crop '
                             '(default 224; 32 with --demo)')
    parser.add_argument('--resize', type=int,
                        help='square side images are resized to before '
                             'cropping (default crop-size x 256 / 224)')
    parser.add_argument('--mean', '-m',
                        help='mean file (.npy of shape (3,) or (3, resize, '
                             'resize)); default: ImageNet RGB mean')
    parser.add_argument('--loaderjob', '-j', type=int, default=2,
                        help='image loading processes per worker '
                             '(0: load in the training process)')
    parser.add_argument('--communicator', default=None,
                        help='ChainerMN communicator, or mpi_fp16 / '
                             'pure_nccl_fp16 (default: naive on CPU, '
                             'pure_nccl on GPU)')
    parser.add_argument('--allreduce-dtype', choices=('float16', 'float32'),
                        default='float16',
                        help='dtype of the gradient all-reduce; float16 '
                             'turns naive into mpi_fp16 and pure_nccl into '
                             'pure_nccl_fp16')
    parser.add_argument('--bn-stats', choices=('final-batch',
                                               'moving-average'),
                        default='final-batch',
                        help='BN statistics for evaluation: the last '
                             'training batch averaged over the workers, or '
                             'moving averages')
    parser.add_argument('--bn-variance', choices=('mean', 'union'),
                        default='mean',
                        help='final-batch variance: the mean of the '
                             'workers\' variances, or the variance of the '
                             'union of their batches')
    parser.add_argument('--device', '-d', default='-1',
                        help='device specifier, e.g. @cupy:0 or -1 for CPU')
    parser.add_argument('--gpu', '-g', action='store_true',
                        help='use the GPU of this worker\'s intra-node rank')
    parser.add_argument('--out', '-o', default='result',
                        help='output directory')
    parser.add_argument('--resume', '-r',
                        help='snapshot to resume from, or "auto" for the '
                             'newest intact one in --out (if any)')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of initialization, data order and '
                             'augmentation')
    parser.add_argument('--log-interval', type=int, default=10,
                        help='iterations between log lines')
    parser.add_argument('--val-interval', type=float, default=1,
                        help='epochs between validations')
    parser.add_argument('--snapshot-interval', type=float, default=1,
                        help='epochs between snapshots')
    parser.add_argument('--snapshot-iterations', type=int, default=0,
                        help='also snapshot every this many iterations '
                             '(0: off)')
    parser.add_argument('--keep-snapshots', type=int, default=3,
                        help='number of newest snapshots to keep')
    parser.add_argument('--on-non-finite', choices=('stop', 'skip'),
                        default='stop',
                        help='on a non-finite gradient: stop training, or '
                             'skip that update and count it')
    parser.add_argument('--skip-bad-images', action='store_true',
                        help='skip (and count) undecodable images instead '
                             'of stopping')
    parser.add_argument('--test', action='store_true',
                        help='smoke test: 5 iterations, log and validate on '
                             'few images at the end')
    recipes.add_arguments(parser)
    args = parser.parse_args(argv)
    return _resolve_defaults(parser, args)


def _resolve_defaults(parser, args):
    if args.demo or args.train is None:
        if args.train is not None or args.val is not None:
            parser.error('--demo takes no train/val arguments')
        args.demo = True
        args.train, args.val = demo.TRAIN_DIR, demo.VAL_DIR
    elif args.val is None:
        parser.error('the validation set is required with a training set')
    if args.epoch is None:
        args.epoch = 3 if args.demo else 90
    recipes.resolve(args, parser)
    if args.crop_size is None:
        args.crop_size = demo.CROP_SIZE if args.demo else 224
    if args.resize is None:
        args.resize = datasets.resize_for(args.crop_size)
    if args.test:
        args.log_interval = 1
        if args.iterations is None:
            args.iterations = 5
    for flag in ('batchsize', 'accumulate', 'val_batchsize', 'epoch',
                 'crop_size', 'log_interval', 'keep_snapshots', 'width'):
        if getattr(args, flag) <= 0:
            raise datasets.InputError('--{} must be positive, got {}'.format(
                flag, getattr(args, flag)))
    if args.iterations is not None and args.iterations <= 0:
        raise datasets.InputError(
            '--iterations must be positive, got {}'.format(args.iterations))
    if args.crop_size < 32:
        raise datasets.InputError(
            '--crop-size must be at least 32 (ResNet-50\'s smallest input), '
            'got {}'.format(args.crop_size))
    return args


def read_dataset(path, root, class_names=None):
    """``(path, label)`` pairs of a list file or a class-folder directory, and
    the class names (None for a list file)."""
    if os.path.isdir(path):
        return datasets.read_class_folders(path, class_names)
    return datasets.read_list_file(path, root), None


def load_datasets(args):
    """Training and validation pairs and the number of classes, all checked."""
    train, class_names = read_dataset(args.train, args.root)
    val, _ = read_dataset(args.val, args.root, class_names)
    n_class = args.n_class
    if n_class is None:
        n_class = len(class_names) if class_names else 1000
    datasets.check_labels(train, n_class, args.train)
    datasets.check_labels(val, n_class, args.val)
    return train, val, n_class


def validation_shard(val, comm, limit=None):
    """This worker's contiguous, disjoint share of the validation set."""
    n = len(val) if limit is None else min(limit, len(val))
    return val[n * comm.rank // comm.size:n * (comm.rank + 1) // comm.size]


def find_resume(args, config):
    """The snapshot to resume from (None to start afresh), checked against
    this run's configuration."""
    if args.resume is None:
        return None
    if args.resume == 'auto':
        path = snapshots.latest_snapshot(args.out)
        if path is None:
            return None
    else:
        path = args.resume
        if not os.path.isfile(path):
            raise datasets.InputError('--resume {}: no such file'.format(path))
        if not snapshots.is_intact(path):
            raise datasets.InputError(
                '--resume {}: damaged or incomplete snapshot'.format(path))
    config.check(path, 'run_configuration')
    return path


def check_writable(out):
    """Fail before training if the output directory cannot be written."""
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, '.write_test')
        with open(probe, 'w'):
            pass
        os.remove(probe)
    except OSError as e:
        raise datasets.InputError('--out {}: not writable ({})'.format(
            out, e.strerror or e))


def create_communicator(args):
    name = args.communicator or ('pure_nccl' if args.gpu else 'naive')
    try:
        return communicators.create_communicator(name, args.allreduce_dtype)
    except ValueError as e:
        raise datasets.InputError('--communicator {} --allreduce-dtype {}: {}'
                                  .format(name, args.allreduce_dtype, e))


def normalization(args):
    """The factory of the model's BN links (--bn-stats, --bn-variance)."""
    if args.bn_stats == 'moving-average':
        return L.BatchNormalization
    return functools.partial(models.FinalBatchNormalization,
                             variance=args.bn_variance,
                             micro_batches=args.accumulate)


def build_model(args, n_class):
    predictor = models.archs[args.arch](
        n_class, norm=normalization(args),
        zero_init_residual=recipes.zero_init_residual(args),
        width=args.width)
    return L.Classifier(predictor)


def build_optimizer(args, comm, model, total_batchsize):
    optimizer = chainermn.create_multi_node_optimizer(
        recipes.create_optimizer(args, total_batchsize), comm)
    optimizer.setup(model)
    optimizer.add_hook(NonFiniteGradientGuard())
    recipes.add_hooks(optimizer, args)
    updaters.broadcast_initial_parameters(optimizer, model, comm)
    return optimizer


def stop_trigger(args):
    if args.iterations is not None:
        return args.iterations, 'iteration'
    return args.epoch, 'epoch'


def interval_trigger(args, epochs):
    """Every ``epochs`` (fractional) epochs, or at the end of a --test run."""
    if args.test:
        return stop_trigger(args)
    return chainer.training.triggers.IntervalTrigger(epochs, 'epoch')


def log_trigger(args):
    """Every --log-interval iterations and at every validation, so that the
    last validation of a run is logged too (a new trigger per extension:
    triggers keep state)."""
    every = (args.log_interval, 'iteration')
    return extensions.AnyOfTriggers(
        [every, interval_trigger(args, args.val_interval)])


def snapshot_trigger(args):
    """Every --snapshot-interval epochs and every --snapshot-iterations."""
    triggers = [interval_trigger(args, args.snapshot_interval)]
    if args.snapshot_iterations > 0:
        triggers.append((args.snapshot_iterations, 'iteration'))
    return extensions.AnyOfTriggers(triggers)


def run_configuration(args, comm, n_class):
    """What a snapshot must share with the run that resumes from it."""
    return snapshots.RunConfiguration(
        arch=args.arch, width=args.width, n_class=n_class,
        bn_stats=args.bn_stats, workers=comm.size, batchsize=args.batchsize,
        accumulate=args.accumulate, seed=args.seed)


def build_trainer(args, comm, device, model, optimizer, train_iter, val_iter,
                  total_batchsize, config):
    updater = updaters.MicroBatchUpdater(
        train_iter, optimizer, datasets.SkippingConverter(), device,
        micro_batches=args.accumulate, on_non_finite=args.on_non_finite)
    trainer = training.Trainer(updater, stop_trigger(args), out=args.out)
    val_trigger = interval_trigger(args, args.val_interval)
    trainer.extend(config, name='run_configuration')
    trainer.extend(extensions.DistributedEvaluator(
        val_iter, model.predictor, comm, datasets.SkippingConverter(),
        device), trigger=val_trigger)
    if args.bn_stats == 'final-batch':
        trainer.extend(extensions.SyncFinalBatchStatistics(
            model, comm, [val_trigger, snapshot_trigger(args)]))
    trainer.extend(extensions.Throughput(total_batchsize))
    scheduled = recipes.extend_trainer(trainer, args, optimizer,
                                       total_batchsize)
    if comm.rank == 0:
        trainer.extend(snapshots.snapshot(args.keep_snapshots),
                       trigger=snapshot_trigger(args))
        trainer.extend(chainer_extensions.LogReport(trigger=log_trigger(args)))
        trainer.extend(chainer_extensions.PrintReport(
            ['epoch', 'iteration', 'main/loss', 'validation/main/loss',
             'main/accuracy', 'validation/main/accuracy',
             'validation/main/top5'] + scheduled + ['images/s',
                                                    'elapsed_time']),
            trigger=log_trigger(args))
        for name, keys in (
                ('loss', ['main/loss', 'validation/main/loss']),
                ('accuracy', ['main/accuracy', 'validation/main/accuracy',
                              'validation/main/top5']),
                *((key, [key]) for key in scheduled)):
            trainer.extend(chainer_extensions.PlotReport(
                keys, 'epoch', trigger=log_trigger(args),
                filename=name + '.png'))
        if sys.stdout.isatty():
            trainer.extend(chainer_extensions.ProgressBar())
    return trainer


def start_forkserver():
    """Start the loaders' forkserver before MPI is initialized: forking a
    process that holds InfiniBand resources crashes the loaders."""
    multiprocessing.set_start_method('forkserver', force=True)
    p = multiprocessing.Process()
    p.start()
    p.join()


def run(args):
    if args.loaderjob > 0:
        start_forkserver()
    comm = create_communicator(args)
    device = chainer.get_device(
        '@cupy:{}'.format(comm.intra_rank) if args.gpu else args.device)
    device.use()
    numpy.random.seed(args.seed)

    failure = None
    try:
        train, val, n_class = load_datasets(args)
        mean = datasets.load_mean(args.mean, args.resize)
        config = run_configuration(args, comm, n_class)
        resume = find_resume(args, config)
        if comm.rank == 0:
            check_writable(args.out)
    except datasets.InputError as e:
        failure = str(e)
    failures = comm.mpi_comm.allgather(failure)
    if any(failures):
        raise datasets.InputError(next(f for f in failures if f))

    total_batchsize = args.batchsize * args.accumulate * comm.size
    if comm.rank == 0:
        print('workers: {}  minibatch per worker: {} x {} micro-batches  '
              'total minibatch: {}'.format(comm.size, args.batchsize,
                                           args.accumulate, total_batchsize))
        print('training images: {}  validation images: {}  classes: {}'
              .format(len(train), len(val), n_class))
    train_iter = datasets.GlobalOrderIterator(
        train, args.batchsize,
        datasets.TrainTransform(args.crop_size, mean, args.resize,
                                args.skip_bad_images),
        rank=comm.rank, n_workers=comm.size, micro_batches=args.accumulate,
        seed=args.seed, n_processes=args.loaderjob)
    val_shard = chainer.datasets.TransformDataset(
        validation_shard(val, comm, 64 if args.test else None),
        datasets.ValTransform(args.crop_size, mean, args.resize,
                              args.skip_bad_images))
    if args.loaderjob > 0:
        val_iter = chainer.iterators.MultiprocessIterator(
            val_shard, args.val_batchsize, repeat=False, shuffle=False,
            n_processes=args.loaderjob)
    else:
        val_iter = chainer.iterators.SerialIterator(
            val_shard, args.val_batchsize, repeat=False, shuffle=False)

    model = build_model(args, n_class)
    model.to_device(device)
    optimizer = build_optimizer(args, comm, model, total_batchsize)
    trainer = build_trainer(args, comm, device, model, optimizer, train_iter,
                            val_iter, total_batchsize, config)
    if resume:
        if comm.rank == 0:
            print('resuming from', resume)
        chainer.serializers.load_npz(resume, trainer)
    try:
        trainer.run(show_loop_exception_msg=False)  # main() reports errors
    except NonFiniteGradientError as e:
        # Every worker sees the same all-reduced gradient and stops here.
        if comm.rank == 0:
            print('{}: error: training diverged: {}; the snapshots in {} '
                  'are untouched'.format(os.path.basename(sys.argv[0]), e,
                                         args.out), file=sys.stderr)
        sys.exit(3)
    except datasets.InputError as e:
        # Met by this worker alone: end the whole job with one line.
        print('{}: error: worker {}: {}'.format(
            os.path.basename(sys.argv[0]), comm.rank, e), file=sys.stderr)
        sys.stderr.flush()
        comm.mpi_comm.Abort(2)


def main(argv=None):
    cpu_runtime.configure()  # keep freed activation buffers in the heap
    try:
        run(parse_args(argv))
    except datasets.InputError as e:
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:  # every worker meets the same error
            print('{}: error: {}'.format(os.path.basename(sys.argv[0]), e),
                  file=sys.stderr)
        sys.exit(2)
    except Exception:
        # One failing worker must end the whole job instead of leaving the
        # others blocked in a collective.
        traceback.print_exc()
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)


if __name__ == '__main__':
    main()

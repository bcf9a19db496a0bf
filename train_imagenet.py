#!/usr/bin/env python
"""Data-parallel ResNet-50 training on ImageNet with Chainer and ChainerMN.

    mpiexec -n 1024 python train_imagenet.py train.txt val.txt --root DIR --gpu

runs the recipe of Akiba, Suzuki & Fukuda (2017), "Extremely Large Minibatch
SGD: Training ResNet-50 on ImageNet in 15 Minutes". ``train`` and ``val`` are
list files or class folders; with neither, the embedded demo data set.
"""
import argparse
import contextlib
import errno
import functools
import math
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import re
import socket
import sys
import time

import chainer_compat  # NOQA: F401  (before chainer: NumPy 2, Python 3.12)
import cuda_stack
cuda_stack.preload()  # pip's CUDA libraries, before CuPy loads (docs/gpu.md)

import chainer
import chainer.links as L
from chainer import training
import chainermn
import numpy

import communicators
from communicators import failures
import datasets
from datasets import demo
import errors
import extensions
from extensions import run_directory
from extensions import signal_stop
from extensions import snapshots
import models
from optimizers import NonFiniteGradientGuard
from optimizers import recipes
import updaters


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add = parser.add_argument
    add('train', nargs='?', help='list file, class folders or decoded .npz')
    add('val', nargs='?', help='validation set, in the same form')
    add('--demo', action='store_true', help='train on the embedded dataset')
    add('--root', default='.',
        help='root of the paths in list files (default: %(default)s)')
    add('--arch', '-a', choices=sorted(models.archs), default='resnet50',
        help='network (default: %(default)s)')
    add('--width', type=float, default=1.0,
        help='channel-width multiplier (default: 1, ResNet-50 itself)')
    add('--n-class', type=int, help='classes (default: folders, or 1000)')
    add('--batchsize', '-B', type=int, default=32,
        help='images per worker per micro-batch (default: %(default)s)')
    add('--accumulate', type=int, default=1,
        help='micro-batches per worker per update (virtual workers; '
        'default: %(default)s)')
    add('--val_batchsize', '-b', type=int, default=250,
        help='validation images per worker per batch (default: '
        '%(default)s)')
    add('--epoch', '-E', type=int, help='epochs (default 90; 3 with --demo)')
    add('--iterations', type=int, help='stop after this many iterations')
    add('--crop-size', type=int, help='crop side (224; 32 with --demo)')
    add('--resize', type=int, help='side before cropping (crop x 256/224)')
    add('--mean', '-m', help='mean .npy, (3,) or (3, resize, resize)')
    add('--loaderjob', '-j', type=int, default=2,
        help='image-loading processes per worker, 0: none (default: '
        '%(default)s)')
    add('--decoder', default='auto', help='JPEG decoder: auto (simplejpeg '
        'where installed, else Pillow) or pillow (default: %(default)s)')
    add('--resize-whole-image', action='store_true',
        help='resize the whole image, then crop (default: the crop\'s box)')
    add('--communicator', help='ChainerMN communicator, mpi_fp16 or '
        'pure_nccl_fp16 (default: naive on CPU, pure_nccl on GPU)')
    add('--allreduce-dtype', choices=('float16', 'float32'), default='float16',
        help='dtype the gradients travel in (default: %(default)s)')
    add('--virtual-worker-rounding', choices=('on', 'off'), default='on',
        help='with --accumulate and a float16 all-reduce, round each '
        'micro-batch\'s gradient as a float16 worker\'s (default: '
        '%(default)s)')
    add('--bn-stats', choices=('final-batch', 'moving-average'),
        default='final-batch',
        help='BN statistics for evaluation (default: %(default)s)')
    add('--bn-variance', choices=models.final_batch_normalization.VARIANCES,
        default='mean', help='final-batch variance: the mean of the workers\' '
        'variances, or the variance of the union of their batches (default: '
        '%(default)s)')
    add('--device', '-d', default='-1',
        help='device: @cupy:N, @numpy or -1 (CPU) (default: %(default)s)')
    add('--gpu', '-g', action='store_true', help='GPU = intra-node rank')
    add('--allow-no-cudnn', action='store_true',
        help='train on GPUs without cuDNN (many times slower)')
    add('--cudnn-autotune', action=argparse.BooleanOptionalAction,
        default=cuda_stack.CUDNN_AUTOTUNE,
        help='time cuDNN\'s convolution algorithms per shape, keep the '
        'fastest (default: on)')
    add('--cudnn-workspace', type=int, default=cuda_stack.CUDNN_WORKSPACE_MIB,
        metavar='MIB', help='cuDNN workspace per convolution, MiB '
        '(default: %(default)s)')
    add('--out', '-o', default='result',
        help='output directory (default: %(default)s)')
    add('--resume', '-r', help='snapshot to resume from, or "auto"')
    add('--allow-new-dataset', action='store_true',
        help='resume on another training set than the snapshot\'s')
    add('--seed', type=int, default=0,
        help='seed of init, order and crops (default: %(default)s)')
    add('--log-interval', type=int, default=10,
        help='iterations per log line (default: %(default)s)')
    add('--val-interval', type=float, default=1,
        help='epochs per validation (default: %(default)s)')
    add('--snapshot-interval', type=float, default=1,
        help='epochs per snapshot (default: %(default)s)')
    add('--snapshot-iterations', type=int, default=0,
        help='a snapshot every this many iterations as well (default: 0, '
        'none)')
    add('--keep-snapshots', type=int, default=3,
        help='newest snapshots kept (default: %(default)s)')
    add('--on-non-finite', choices=('stop', 'skip'), default='stop',
        help='a non-finite gradient stops the job (exit 3) or skips its '
        'update (default: %(default)s)')
    add('--stall-timeout', type=float, default=600, metavar='SECONDS',
        help='end the job (exit 5) when a worker is silent, or in one '
        'update, this long; 0: never (default: %(default)s)')
    add('--skip-bad-images', action='store_true',
        help='count undecodable images and go on, instead of stopping')
    add('--test', action='store_true',
        help='smoke test: 5 iterations, log every one, validate on 64 images '
             'spread over the validation set')
    recipes.add_arguments(parser)
    args = parser.parse_args(argv)
    if (args.train is None) != (args.val is None) or args.demo and args.train:
        parser.error('give the training and validation sets, or --demo')
    return args


#: The ``--device`` values this script accepts.
_DEVICE = re.compile(r'^(-1|@numpy|@intel64|@cupy:\d+)$')


def check_args(args):
    """One-line errors, naming the flag, for values argparse lets through."""
    checks = [(name, math.isfinite(value), 'finite')
              for name, value in sorted(vars(args).items())
              if isinstance(value, float)]
    checks += [(name, getattr(args, name) > 0, 'positive') for name in (
        'batchsize', 'accumulate', 'val_batchsize', 'epoch', 'width',
        'log_interval', 'keep_snapshots', 'val_interval',
        'snapshot_interval', 'resize')] + [
        ('iterations', args.iterations is None or args.iterations > 0,
         'positive'),
        ('n_class', args.n_class is None or args.n_class > 0, 'positive'),
        ('snapshot_iterations', args.snapshot_iterations >= 0,
         'non-negative (0: off)'),
        ('crop_size', args.crop_size >= 32, 'at least 32'),
        ('crop_size', args.crop_size <= args.resize,
         'at most --resize ({})'.format(args.resize)),
        ('loaderjob', args.loaderjob >= 0, 'non-negative'),
        ('decoder', args.decoder in datasets.DECODERS,
         ' or '.join(datasets.DECODERS)),
        ('cudnn_workspace', args.cudnn_workspace >= 0, 'non-negative'),
        ('seed', 0 <= args.seed < 2 ** 32, 'in [0, 2**32)'),
        ('device', _DEVICE.match(args.device),
         '@cupy:N, @numpy or -1 (CPU)')]
    for name, ok, expected in checks:
        if not ok:
            raise failures.JobInputError('--{} must be {}, got {}'.format(
                name if name == 'val_batchsize' else name.replace('_', '-'),
                expected, getattr(args, name)))
    with failures.flag_errors():
        return recipes.resolve(args.recipe, args.epoch, **{
            name: getattr(args, name) for name in recipes.OVERRIDES})


@contextlib.contextmanager
def naming(flag):
    """A library's error about a file it was given, whose message starts
    with the path, names the flag too: ``--mean m.npy: no such file``."""
    try:
        yield
    except errors.InputError as e:
        raise errors.InputError('{} {}'.format(flag, e))


def resume_from(path, trainer):
    """Load snapshot ``path`` into ``trainer``; its errors name --resume."""
    with naming('--resume'):
        snapshots.load(path, trainer)


#: Environment variables that MPI launchers set in every process they start.
_LAUNCHED = ('OMPI_COMM_WORLD_SIZE', 'PMIX_RANK', 'PMI_RANK', 'PMI_SIZE')


def main(argv=None):
    if not any(name in os.environ for name in _LAUNCHED):
        # One process without a launcher: Open MPI's shared-memory transport
        # would leave its 16 MiB file in /dev/shm, with no daemon to remove it
        os.environ.setdefault('OMPI_MCA_btl', 'self')
    args = parse_args(argv)
    if args.train is None:
        args.demo, args.train, args.val = True, demo.TRAIN_DIR, demo.VAL_DIR
    epoch, crop_size = (3, demo.CROP_SIZE) if args.demo else (90, 224)
    args.epoch = epoch if args.epoch is None else args.epoch
    args.crop_size = crop_size if args.crop_size is None else args.crop_size
    args.resize = args.resize or datasets.resize_for(args.crop_size)
    if args.test:
        args.log_interval, args.iterations = 1, args.iterations or 5
    with failures.ending_the_job(args.out):
        train(args, check_args(args))


def claim_output(out, resume):
    """Lock ``--out`` for this job (the lock file, to keep open) and refuse
    it if it holds a run that this one does not continue."""
    try:
        lock = run_directory.claim(out)
        run_directory.check_not_another_run(out, resume)
    except run_directory.DirectoryInUse as e:
        raise failures.JobInputError(
            '--out {}; wait for it to end or choose another --out'.format(e))
    except run_directory.HoldsAnotherRun as e:
        raise failures.JobInputError(
            '--out {}; continue it with --resume auto, or choose another '
            '--out'.format(e))
    except run_directory.FileInTheWay as e:
        raise failures.JobInputError('--out {}'.format(e))
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise failures.JobInputError('--out {}'.format(
                run_directory.NoSpace(out, run_directory.free_bytes(out))))
        raise failures.JobInputError('--out {}: not writable ({})'.format(
            out, e.strerror or e))
    return lock


def check_free_space(out, model):
    """Refuse ``--out`` unless one snapshot and the trained model fit: the
    parameters and up to two optimizer buffers of the same size (RMSprop
    warm-up's), then the parameters again in float32."""
    needed = sum(3 * param.array.nbytes + 4 * param.size
                 for param in model.params())
    try:
        run_directory.check_free_space(out, needed)
    except run_directory.NoSpace as e:
        raise failures.JobInputError('--out {}'.format(e))


def train(args, recipe):
    # The loaders' forkserver starts before MPI: forks of it crash on IB.
    # The resource tracker removes the shared-memory index of a worker that
    # MPI_Abort ended; that cleanup needs no warning.
    sys.warnoptions.append('ignore:resource_tracker:UserWarning')
    failures.use_the_jobs_session_directory()
    with signal_stop.ignoring():
        multiprocessing.resource_tracker.ensure_running()
        if args.loaderjob > 0:
            multiprocessing.set_start_method('forkserver', force=True)
            multiprocessing.forkserver.ensure_running()

    # Check the GPU stack; set up the communicator and the device
    on_gpu = args.gpu or args.device.startswith('@cupy')
    comm_name = args.communicator or ('pure_nccl' if on_gpu else 'naive')
    if on_gpu:
        with failures.flag_errors('--gpu' if args.gpu else '--device'):
            try:
                cuda_stack.check(args.allow_no_cudnn, 'nccl' in comm_name)
            except cuda_stack.CudnnOffError as e:
                raise errors.InputError('{}, or pass --allow-no-cudnn to '
                                        'train without it'.format(e))
    with failures.flag_errors('--communicator {} --allreduce-dtype {}'.format(
            comm_name, args.allreduce_dtype)):
        comm = communicators.create_communicator(
            comm_name, args.allreduce_dtype, gpu=on_gpu)
    stop = signal_stop.SignalStop(comm)
    device = args.device
    if on_gpu:  # a visible GPU of its own for every process
        with naming('--gpu' if args.gpu else '--device ' + args.device):
            device_id = failures.agree(
                comm, cuda_stack.device_for, comm.intra_rank,
                cuda_stack.visible_gpus(),
                None if args.gpu else int(args.device.split(':')[1]))
            failures.agree(comm, cuda_stack.check_not_shared,
                           comm.mpi_comm.allgather(
                               cuda_stack.placement(device_id)))
        device = '@cupy:{}'.format(device_id)
    device = chainer.get_device(device)
    device.use()
    if on_gpu:
        cuda_stack.configure_cudnn(args.cudnn_autotune, args.cudnn_workspace)
        if comm.rank == 0:
            print(cuda_stack.stack_line(device.device.id))
    # The CPU engine's layers and update kernels on NumPy, Chainer's on GPUs
    layers, cpu_kernels = models.chainer_layers, None
    if device.xp is numpy:
        import cpu_engine  # oneDNN and OpenMP: for CPU runs only
        # keep freed buffers in the heap; check OMP_NUM_THREADS
        failures.agree(comm, cpu_engine.cpu_runtime.configure)
        layers, cpu_kernels = cpu_engine, cpu_engine.updates
    numpy.random.seed(args.seed)

    # Read and check the datasets (on rank 0), the mean and the snapshot
    def read_inputs():
        train, val, n_class = datasets.load_datasets(
            comm, args.train, args.val, args.root, args.n_class, args.resize)
        config = snapshots.RunConfiguration(
            arch=args.arch, width=args.width, n_class=n_class,
            bn_stats=args.bn_stats, workers=comm.size,
            batchsize=args.batchsize, accumulate=args.accumulate,
            seed=args.seed, dtype=recipe.dtype, recipe=recipe.name,
            optimizer=recipe.optimizer,
            momentum_correction=recipe.momentum_correction,
            lars=recipe.lars, dataset=datasets.fingerprint(train))
        if args.allow_new_dataset:
            config.free_keys = ('dataset',)
        lock = claim_output(args.out, args.resume) if comm.rank == 0 \
            else None
        with naming('--resume'):
            resume = snapshots.find_resume(args.resume, args.out, config)
        with naming('--mean'):
            mean = datasets.load_mean(args.mean, args.resize)
        return train, val, n_class, config, resume, mean, lock
    train_set, val_set, n_class, config, resume, mean, lock = failures.agree(
        comm, read_inputs)
    total_batchsize = args.batchsize * args.accumulate * comm.size
    if total_batchsize > len(train_set):
        raise failures.JobInputError(
            'total minibatch {} (--batchsize x --accumulate x {} workers) is '
            'larger than the training set ({} images)'.format(
                total_batchsize, comm.size, len(train_set)))
    nodes = failures.node_ranks(comm.mpi_comm)
    if comm.rank == 0:
        print(nodes)
        print('workers: {}  minibatch per worker: {} x {} micro-batches  '
              'total minibatch: {}'.format(comm.size, args.batchsize,
                                           args.accumulate, total_batchsize))
        print('training images: {}  validation images: {}  classes: {}'
              .format(len(train_set), len(val_set), n_class))

    # Set up the iterators; on GPUs the images travel as uint8 and are
    # normalized on the device (a per-pixel mean: on the host)
    uint8_input = device.xp is not numpy and mean.ndim == 1
    transform = datasets.TrainTransform(
        args.crop_size, mean, args.resize, args.skip_bad_images,
        args.decoder, args.resize_whole_image, uint8_input)
    normalize = transform.normalize_batch if uint8_input else None
    train_iter = failures.agree(
        comm, datasets.GlobalOrderIterator, train_set, args.batchsize,
        transform, rank=comm.rank, n_workers=comm.size,
        micro_batches=args.accumulate, seed=args.seed,
        n_processes=args.loaderjob)
    val_iter = datasets.validation_iterator(
        val_set, comm.rank, comm.size, datasets.ValTransform(
            args.crop_size, mean, args.resize, args.skip_bad_images,
            args.decoder, args.resize_whole_image, uint8_input),
        args.val_batchsize, args.loaderjob, limit=64 if args.test else None)

    # Set up the model
    norm = layers.BatchNormalization
    if args.bn_stats == 'final-batch':
        norm = functools.partial(
            models.FinalBatchNormalization, variance=args.bn_variance,
            micro_batches=args.accumulate,
            batch_normalization=layers.batch_normalization)
    if recipe.dtype == 'mixed16':
        chainer.global_config.dtype = chainer.mixed16
    predictor = models.archs[args.arch](n_class, norm=norm, layers=layers,
                                        width=args.width)
    if recipe.zero_init_residual:
        models.zero_init_residual(predictor)
    if recipe.dtype == 'mixed16':
        predictor = models.MixedPrecision(predictor)
    model = L.Classifier(predictor, lossfun=functools.partial(
        models.label_smoothed_cross_entropy, eps=recipe.label_smoothing))
    model.to_device(device)
    if comm.rank == 0:
        failures.agree(comm, check_free_space, args.out, model)
    else:
        failures.agree(comm, lambda: None)

    # Set up the optimizer
    optimizer = chainermn.create_multi_node_optimizer(
        recipes.create_optimizer(recipe, cpu_kernels), comm)
    optimizer.setup(model)
    optimizer.add_hook(NonFiniteGradientGuard(checked_by=comm))
    recipes.add_hooks(optimizer, recipe, cpu_kernels)
    communicators.broadcast_initial_parameters(optimizer, model, comm)

    # Set up the trainer
    loss_scale = recipes.create_loss_scale(recipe)
    updater = updaters.MicroBatchUpdater(
        train_iter, optimizer, datasets.SkippingConverter(normalize), device,
        args.accumulate, args.on_non_finite, loss_scale,
        rounded_workers=(comm.size * args.accumulate
                         if args.allreduce_dtype == 'float16'
                         and args.virtual_worker_rounding == 'on' else None))
    length = ((args.iterations, 'iteration') if args.iterations
              else (args.epoch, 'epoch'))
    trainer = training.Trainer(updater, stop.stop_trigger(length),
                               out=args.out)

    # Set up the extensions; every run logs and snapshots at its end, and
    # snapshots when a stop signal ends it early
    val_trigger = length if args.test else (args.val_interval, 'epoch')
    snapshot_triggers = [length, stop.requested] + (
        [] if args.test else [(args.snapshot_interval, 'epoch')]) + (
        [(args.snapshot_iterations, 'iteration')]
        if args.snapshot_iterations > 0 else [])
    trainer.extend(config, name='run_configuration')
    if comm.size > 1 and args.stall_timeout > 0:
        watchdog = extensions.StallWatchdog(
            comm.mpi_comm, comm.mpi_comm.allgather(socket.gethostname()),
            args.stall_timeout)
        for extension in watchdog.extensions():
            trainer.extend(extension)
    trainer.extend(stop, name='signal_stop')
    trainer.extend(extensions.DistributedEvaluator(
        val_iter, model.predictor, comm, datasets.SkippingConverter(normalize),
        device), trigger=val_trigger)
    if args.bn_stats == 'final-batch':
        trainer.extend(extensions.SyncFinalBatchStatistics(
            model, comm, [val_trigger] + snapshot_triggers))
    trainer.extend(extensions.Throughput(total_batchsize))
    scheduled = recipes.extend_trainer(trainer, recipe, optimizer,
                                       total_batchsize)
    if loss_scale is not None:
        scheduled += ['loss_scale', 'overflows']
    if comm.rank == 0:
        trainer.extend(snapshots.snapshot(args.keep_snapshots),
                       trigger=extensions.AnyOfTriggers(snapshot_triggers))
        extensions.add_reports(trainer, scheduled, [
            (args.log_interval, 'iteration'), val_trigger, length])

    # Run
    if resume:
        failures.agree(comm, resume_from, resume, trainer)
        if comm.rank == 0:
            print('resuming from {} at iteration {} (epoch {:.2f})'.format(
                resume, updater.iteration, updater.epoch_detail), flush=True)
    start = time.time()
    try:
        trainer.run(show_loop_exception_msg=False)
    except datasets.UndecodableImageError as e:
        raise errors.InputError(
            '{}; fix or remove it, or pass --skip-bad-images'.format(e))
    except OSError as e:  # a log, a plot: as a snapshot's own NoSpace
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise run_directory.NoSpace(
            e.filename or args.out, run_directory.free_bytes(args.out),
            note='the snapshots written before it are intact') from None
    if stop.signal_number and not trainer.stop_trigger.reached:
        raise failures.Stopped(
            'stopped by {} after iteration {}; its snapshot is {}; continue '
            'with --resume auto'.format(
                stop.signal_name, stop.iteration, os.path.join(
                    args.out, snapshots.SNAPSHOT_NAME.format(stop.iteration))))
    if comm.rank == 0:
        snapshots.AtomicWriter()(
            snapshots.MODEL_NAME, args.out, models.plain_copy(
                model.predictor, functools.partial(
                    models.archs[args.arch], n_class, width=args.width)))
        print(extensions.summary_line(trainer, time.time() - start),
              flush=True)


if __name__ == '__main__':
    main()

#!/usr/bin/env python
"""Data-parallel ResNet-50 training on ImageNet with Chainer and ChainerMN.

    mpiexec -n 1024 python train_imagenet.py train.txt val.txt --root DIR --gpu

runs the recipe of Akiba, Suzuki & Fukuda (2017), "Extremely Large Minibatch
SGD: Training ResNet-50 on ImageNet in 15 Minutes". ``train`` and ``val`` are
list files or class folders; with neither, the embedded demo data set.
"""
import argparse
import dataclasses
import functools
import math
import os
import re
import socket

import chainer_compat  # NOQA: F401  (before chainer: NumPy 2, Python 3.12)
import cuda_stack
cuda_stack.preload()  # pip's CUDA libraries, before CuPy loads (docs/gpu.md)

import chainer
from chainer import training
import numpy

import communicators
import job
import image_data
from image_data import demo
import errors
import extensions
from extensions import signal_stop
from extensions import snapshots
import models
from optimizers import recipes
import updaters


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])

    def group(title):
        return parser.add_argument_group(title).add_argument
    add = group('data: the training and validation sets, their preprocessing')
    add('train', nargs='?', help='list file, class folders or decoded .npz')
    add('val', nargs='?', help='validation set, in the same form')
    add('--demo', action='store_true', help='train on the embedded dataset')
    add('--root', '-R', default='.',
        help='root of the paths in list files (default: %(default)s)')
    add('--n-class', type=int, help='classes (default: the class folders, '
        'or the largest label of the list files + 1)')
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
    add('--skip-bad-images', action='store_true',
        help='count undecodable images and go on, instead of stopping')
    add = group('model')
    add('--arch', '-a', choices=sorted(models.archs), default='resnet50',
        help='network (default: %(default)s)')
    add('--width', type=float, default=1.0,
        help='channel-width multiplier (default: 1, ResNet-50 itself)')
    add('--bn-stats', choices=('final-batch', 'moving-average'),
        default='final-batch',
        help='BN statistics for evaluation (default: %(default)s)')
    add('--bn-variance', choices=models.final_batch_normalization.VARIANCES,
        default='mean', help='final-batch variance: the mean of the workers\' '
        'variances, or the variance of the union of their batches (default: '
        '%(default)s)')
    add('--initmodel', help='start from the weights of this model.npz, '
        'snapshot or ResNet50Layers file (a new head where the class count '
        'differs)')
    add = group('minibatch and length')
    add('--batchsize', '-B', type=int, default=32,
        help='images per worker per micro-batch (default: %(default)s)')
    add('--accumulate', type=_count_or_auto, default=1,
        help='micro-batches per worker per update (virtual workers), or '
        'auto: the resumed snapshot\'s total on the workers at hand '
        '(default: %(default)s)')
    add('--val_batchsize', '--val-batchsize', '-b', type=int, default=250,
        help='validation images per worker per batch (default: '
        '%(default)s)')
    add('--epoch', '-E', type=int, help='epochs (default 90; 3 with --demo)')
    add('--iterations', type=int, help='stop after this many iterations')
    add('--seed', type=int, default=0,
        help='seed of init, order and crops (default: %(default)s)')
    add('--test', action='store_true',
        help='smoke test: 5 iterations, log every one, validate on 64 images '
             'spread over the validation set')
    add = group('devices and communication')
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
    add('--communicator', help='ChainerMN communicator, mpi_fp16 or '
        'pure_nccl_fp16 (default: mpi_fp16 on CPU and pure_nccl_fp16 on '
        'GPU; naive and pure_nccl with --allreduce-dtype float32)')
    add('--allreduce-dtype', choices=('float16', 'float32'), default='float16',
        help='dtype the gradients travel in (default: %(default)s)')
    add('--virtual-worker-rounding', choices=('on', 'off'), default='on',
        help='with --accumulate and a float16 all-reduce, round each '
        'micro-batch\'s gradient as a float16 worker\'s (default: '
        '%(default)s)')
    add = group('output, logs, resume and reliability')
    add('--out', '-o', default='result',
        help='output directory (default: %(default)s)')
    add('--resume', '-r', help='snapshot to resume from, or "auto"')
    add('--allow-new-dataset', action='store_true',
        help='resume on another training set than the snapshot\'s')
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
    add('--tensorboard', action='store_true',
        help='also write the log\'s scalars as TensorBoard events to '
        'OUT/tensorboard (tensorboardX, the tensorboard extra)')
    add('--stall-timeout', type=float, default=600, metavar='SECONDS',
        help='end the job (exit 5) when a worker is silent, or in one '
        'update, this long; 0: never (default: %(default)s)')
    recipes.add_arguments(parser)
    args = parser.parse_args(argv)
    if (args.train is None) != (args.val is None) or args.demo and args.train:
        parser.error('give the training and validation sets, or --demo')
    return args


def _count_or_auto(text):
    return text if text == 'auto' else int(text)


#: The ``--device`` values this script accepts.
_DEVICE = re.compile(r'^(-1|@numpy|@intel64|@cupy:\d+)$')


def check_args(args):
    """One-line errors, naming the flag, for values argparse lets through."""
    checks = [(name, math.isfinite(value), 'finite')
              for name, value in sorted(vars(args).items())
              if isinstance(value, float)]
    checks += [(name, getattr(args, name) > 0, 'positive') for name in (
        'batchsize', 'val_batchsize', 'epoch', 'width',
        'log_interval', 'keep_snapshots', 'val_interval',
        'snapshot_interval', 'resize')] + [
        ('iterations', args.iterations is None or args.iterations > 0,
         'positive'),
        ('accumulate', args.accumulate == 'auto' or args.accumulate > 0,
         'positive or auto'),
        ('n_class', args.n_class is None or args.n_class > 0, 'positive'),
        ('snapshot_iterations', args.snapshot_iterations >= 0,
         'non-negative (0: off)'),
        ('crop_size', args.crop_size >= 32, 'at least 32'),
        ('crop_size', args.crop_size <= args.resize,
         'at most --resize ({})'.format(args.resize)),
        ('loaderjob', args.loaderjob >= 0, 'non-negative'),
        ('decoder', args.decoder in image_data.DECODERS,
         ' or '.join(image_data.DECODERS)),
        ('cudnn_workspace', args.cudnn_workspace >= 0, 'non-negative'),
        ('seed', 0 <= args.seed < 2 ** 32, 'in [0, 2**32)'),
        ('device', _DEVICE.match(args.device),
         '@cupy:N, @numpy or -1 (CPU)')]
    for name, ok, expected in checks:
        if not ok:
            raise job.JobInputError('--{} must be {}, got {}'.format(
                name if name == 'val_batchsize' else name.replace('_', '-'),
                expected, getattr(args, name)))
    with job.flag_errors():
        return recipes.resolve(args.recipe, args.epoch, **{
            name: getattr(args, name) for name in recipes.OVERRIDES})


def main(argv=None):
    args = parse_args(argv)
    if args.train is None:
        args.demo, args.train, args.val = True, demo.TRAIN_DIR, demo.VAL_DIR
    epoch, crop_size = (3, demo.CROP_SIZE) if args.demo else (90, 224)
    args.epoch = epoch if args.epoch is None else args.epoch
    args.crop_size = crop_size if args.crop_size is None else args.crop_size
    args.resize = args.resize or image_data.resize_for(args.crop_size)
    if args.test:
        args.log_interval, args.iterations = 1, args.iterations or 5
    with job.ending_the_job(args.out):
        train(args, check_args(args))


def create_device(args, comm):
    """The worker's Chainer device; on GPUs cuDNN configured and the stack
    line printed by rank 0."""
    if not (args.gpu or args.device.startswith('@cupy')):
        return chainer.get_device(args.device)
    device = chainer.get_device('@cupy:{}'.format(job.choose_gpu(
        comm, '--gpu' if args.gpu else '--device ' + args.device,
        None if args.gpu else int(args.device.split(':')[1]))))
    device.use()
    cuda_stack.configure_cudnn(args.cudnn_autotune, args.cudnn_workspace)
    if comm.rank == 0:
        print(cuda_stack.stack_line(device.device.id))
    return device


def read_inputs(args, recipe, comm):
    """The datasets (read on rank 0), the class count, the run's
    configuration, the snapshot to resume from and the mean; rank 0 claims
    ``--out``."""
    if args.accumulate == 'auto':
        with job.naming('--accumulate auto:'):
            path = snapshots.resume_path(args.resume, args.out)
            if path is None:
                raise errors.InputError(
                    'no snapshot to resume from (--resume {}); give '
                    '--accumulate K'.format(args.resume))
            args.accumulate = snapshots.virtual_workers_per_worker(
                path, comm.size)
        if comm.rank == 0:
            print('--accumulate auto: {} micro-batches per worker keep the '
                  'total of {}'.format(args.accumulate, path))
    train, val, n_class = image_data.load_datasets(
        comm, args.train, args.val, args.root, args.n_class, args.resize)
    config = snapshots.RunConfiguration(
        arch=args.arch, width=args.width, n_class=n_class,
        bn_stats=args.bn_stats, workers=comm.size, batchsize=args.batchsize,
        accumulate=args.accumulate, seed=args.seed, dtype=recipe.dtype,
        recipe=recipe.name, optimizer=recipe.optimizer,
        momentum_correction=recipe.momentum_correction, lars=recipe.lars,
        dataset=image_data.fingerprint(train), bn_variance=args.bn_variance)
    if args.allow_new_dataset:
        config.free_keys = ('dataset',)
    if comm.rank == 0:
        job.claim_output(args.out, args.resume)
    with job.naming('--resume'):
        resume = snapshots.find_resume(args.resume, args.out, config)
    with job.naming('--mean'):
        mean = image_data.load_mean(args.mean, args.resize)
    return train, val, n_class, config, resume, mean


def train(args, recipe):
    job.prepare_process(args.loaderjob > 0)

    # Check the GPU stack; set up the communicator and the device
    on_gpu = args.gpu or args.device.startswith('@cupy')
    comm_name = args.communicator or ('pure_nccl' if on_gpu else 'naive')
    if on_gpu:
        job.check_gpu_stack('--gpu' if args.gpu else '--device',
                            args.allow_no_cudnn, 'nccl' in comm_name)
    with job.flag_errors('--communicator {} --allreduce-dtype {}'.format(
            comm_name, args.allreduce_dtype)):
        comm = communicators.create_communicator(
            comm_name, args.allreduce_dtype, gpu=on_gpu)
    stop = signal_stop.SignalStop(comm)
    device = create_device(args, comm)
    # The CPU engine's layers and update kernels on NumPy, Chainer's on GPUs
    layers, cpu_kernels = models.chainer_layers, None
    if device.xp is numpy:
        import cpu_engine  # oneDNN and OpenMP: for CPU runs only
        # keep freed buffers in the heap; check OMP_NUM_THREADS
        job.agree(comm, cpu_engine.cpu_runtime.configure)
        layers, cpu_kernels = cpu_engine, cpu_engine.updates
    numpy.random.seed(args.seed)

    # Read and check the datasets, the mean and the snapshot
    train_set, val_set, n_class, config, resume, mean = job.agree(
        comm, read_inputs, args, recipe, comm)
    total_batchsize = args.batchsize * args.accumulate * comm.size
    if total_batchsize > len(train_set):
        raise job.JobInputError(
            'total minibatch {} (--batchsize x --accumulate x {} workers) is '
            'larger than the training set ({} images)'.format(
                total_batchsize, comm.size, len(train_set)))
    nodes = job.node_ranks(comm.mpi_comm)
    if comm.rank == 0:
        print(nodes)
        print('workers: {}  minibatch per worker: {} x {} micro-batches  '
              'total minibatch: {}'.format(comm.size, args.batchsize,
                                           args.accumulate, total_batchsize))
        print('training images: {}  validation images: {}  classes: {} '
              '({})'.format(len(train_set), len(val_set), n_class,
                            image_data.class_count_source(args.train,
                                                        args.n_class)))

    # The iterators; on GPUs the images travel as uint8 and are normalized
    # on the device (a per-pixel mean: on the host)
    uint8_input = device.xp is not numpy and mean.ndim == 1
    transform_args = (args.crop_size, mean, args.resize,
                      args.skip_bad_images, args.decoder,
                      args.resize_whole_image, uint8_input)
    transform = image_data.TrainTransform(*transform_args)
    converter = image_data.SkippingConverter(
        transform.normalize_batch if uint8_input else None)
    train_iter = job.agree(
        comm, image_data.GlobalOrderIterator, train_set, args.batchsize,
        transform, rank=comm.rank, n_workers=comm.size,
        micro_batches=args.accumulate, seed=args.seed,
        n_processes=args.loaderjob)
    val_iter = image_data.validation_iterator(
        val_set, comm.rank, comm.size, image_data.ValTransform(*transform_args),
        args.val_batchsize, args.loaderjob, limit=64 if args.test else None)

    # The model, the optimizer and the trainer
    if recipe.dtype == 'mixed16':
        chainer.global_config.dtype = chainer.mixed16
    model = models.build_classifier(
        n_class, args.arch, args.width, args.bn_stats, args.bn_variance,
        args.accumulate, recipe.dtype, recipe.zero_init_residual,
        recipe.label_smoothing, layers)
    if args.initmodel:
        with job.naming('--initmodel'):
            line = job.agree(comm, models.saved_model.initialize,
                             model.predictor, args.initmodel)
        if line and comm.rank == 0:
            print('--initmodel ' + line)
    model.to_device(device)
    job.agree(comm, job.check_free_space if comm.rank == 0
              else (lambda *_: None), args.out, model)
    optimizer = recipes.create_multi_node_optimizer(recipe, model, comm,
                                                    cpu_kernels)
    communicators.broadcast_initial_parameters(optimizer, model, comm)
    loss_scale = recipes.create_loss_scale(recipe)
    updater = updaters.MicroBatchUpdater(
        train_iter, optimizer, converter, device, args.accumulate,
        args.on_non_finite, loss_scale, rounded_workers=(
            comm.size * args.accumulate if getattr(
                comm, 'rounds_to_float16', False)
            and args.virtual_worker_rounding == 'on' else None))
    length = ((args.iterations, 'iteration') if args.iterations
              else (args.epoch, 'epoch'))
    trainer = training.Trainer(updater, stop.stop_trigger(length),
                               out=args.out)
    add_extensions(trainer, args, comm, stop, config, model, recipe,
                   optimizer, val_iter, converter, length, total_batchsize)

    # Run
    if comm.rank == 0:
        extensions.record_start(args.out, vars(args), dataclasses.asdict(
            recipe), comm.size, resume)
    if resume:
        with job.naming('--resume'):
            job.agree(comm, snapshots.load, resume, trainer)
        if comm.rank == 0:
            print('resuming from {} at iteration {} (epoch {:.2f})'.format(
                resume, updater.iteration, updater.epoch_detail), flush=True)
    with job.training(args.out):
        trainer.run(show_loop_exception_msg=False)
    job.check_stopped(stop, trainer, args.out, snapshots.SNAPSHOT_NAME)
    if comm.rank == 0:
        snapshots.AtomicWriter()(snapshots.MODEL_NAME, args.out, model_file(
            args, recipe, model, n_class, getattr(
                train_set, 'class_names', None), mean, trainer))
        print(extensions.summary_line(trainer), flush=True)


def model_file(args, recipe, model, n_class, class_names, mean, trainer):
    """model.npz's content: the plain network (:func:`models.plain_copy`)
    and its metadata (:class:`models.saved_model.ModelFile`)."""
    last = extensions.last_validation(trainer)
    return models.saved_model.ModelFile(models.plain_copy(
        model.predictor, functools.partial(
            models.archs[args.arch], n_class, width=args.width)), dict(
        arch=args.arch, width=args.width, n_class=n_class,
        class_names=list(class_names or image_data.class_names_of(args.train)),
        crop_size=args.crop_size, resize=args.resize, mean=mean,
        recipe=dataclasses.asdict(recipe), validation={
            key: last[key] for key in (
                'validation/main/accuracy', 'validation/main/top5',
                'validation/main/loss', 'iteration', 'epoch')}
        if last else {}))


def add_extensions(trainer, args, comm, stop, config, model, recipe,
                   optimizer, val_iter, converter, length, total_batchsize):
    """Every run validates, logs and snapshots at its end, and snapshots
    when a stop signal ends it early; validation, BN statistics,
    throughput, the schedules, the stall watchdog and rank 0's reports."""
    # validation also at the end: the closing line scores model.npz
    val_trigger = length if args.test else extensions.AnyOfTriggers(
        [(args.val_interval, 'epoch'), length])
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
        val_iter, model.predictor, comm, converter, trainer.updater.device),
        trigger=val_trigger)
    if args.bn_stats == 'final-batch':
        trainer.extend(extensions.SyncFinalBatchStatistics(
            model, comm, [val_trigger] + snapshot_triggers))
    trainer.extend(extensions.Throughput(total_batchsize))
    scheduled = recipes.extend_trainer(trainer, recipe, optimizer,
                                       total_batchsize)
    if trainer.updater.loss_scale is not None:
        scheduled += ['loss_scale', 'overflows']
    if comm.rank == 0:
        trainer.extend(snapshots.snapshot(args.keep_snapshots),
                       trigger=extensions.AnyOfTriggers(snapshot_triggers))
        extensions.add_reports(trainer, scheduled, [
            (args.log_interval, 'iteration'), val_trigger, length])
        if args.tensorboard:
            trainer.extend(extensions.TensorBoardReport(os.path.join(
                args.out, 'tensorboard')), trigger=extensions.AnyOfTriggers(
                    [(args.log_interval, 'iteration'), val_trigger, length]))


if __name__ == '__main__':
    main()

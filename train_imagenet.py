#!/usr/bin/env python
"""Data-parallel ResNet-50 training on ImageNet with Chainer and ChainerMN.

    mpiexec -n 1024 python train_imagenet.py train.txt val.txt --root DIR --gpu

runs the recipe of Akiba, Suzuki & Fukuda (2017), "Extremely Large Minibatch
SGD: Training ResNet-50 on ImageNet in 15 Minutes". ``train`` and ``val`` are
list files or class folders; with neither, the embedded demo data set.
"""
import dataclasses
import os

import chainer_compat  # NOQA: F401  (before chainer: NumPy 2, Python 3.12)
import cuda_stack
cuda_stack.preload()  # pip's CUDA libraries, before CuPy loads (docs/gpu.md)

import chainer
from chainer import training
import numpy

import communicators
import job
import image_data
import errors
import extensions
from extensions import signal_stop
from extensions import snapshots
import models
from optimizers import recipes
import train_arguments
import updaters


#: What the line of a worker that ran out of memory ends with.
OUT_OF_MEMORY_ADVICE = (
    'halve --batchsize and double --accumulate: the total minibatch stays '
    'the same (validation has its own, --val-batchsize)')
#: What the line of a worker whose loader process died ends with.
LOADER_ADVICE = (
    'fewer --loaderjob processes need less memory (0 loads in the training '
    'process); continue with --resume auto')


def main(argv=None):
    args = train_arguments.parse(argv)
    with job.ending_the_job(args.out, OUT_OF_MEMORY_ADVICE, LOADER_ADVICE):
        with job.naming():
            train_arguments.check(args)
            recipe = train_arguments.recipe_of(args, args.epoch)
        train(args, recipe)


@dataclasses.dataclass
class Inputs:
    """What the workers read and agree on before training."""
    train: object
    val: object
    n_class: int
    config: snapshots.RunConfiguration
    resume: str
    mean: numpy.ndarray
    total_batchsize: int


def read_inputs(args, recipe, comm):
    """The datasets (read on rank 0), the class count, the run's
    configuration, the snapshot to resume from, the mean and the total
    minibatch; rank 0 claims ``--out``."""
    if args.accumulate == 'auto':
        with job.naming('--accumulate auto:'):
            path = snapshots.resume_path(args.resume, args.out)
            args.accumulate = snapshots.virtual_workers_per_worker(
                path, comm.size)
        if comm.rank == 0:
            print('--accumulate auto: {} micro-batches per worker keep the '
                  'total of {}'.format(args.accumulate, path))
    train, val, n_class = image_data.load_datasets(
        comm, args.train, args.val, args.root, args.n_class, args.resize)
    total_batchsize = args.batchsize * args.accumulate * comm.size
    if total_batchsize > len(train):
        raise errors.InputError(
            'total minibatch {} (--batchsize x --accumulate x {} workers) is '
            'larger than the training set ({} images)'.format(
                total_batchsize, comm.size, len(train)))
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
    return Inputs(train, val, n_class, config, resume, mean, total_batchsize)


def train(args, recipe):
    job.prepare_process(args.loaderjob > 0)

    # The communicator (GPU stack checked first), watched, and the device
    with extensions.start_deadline(args.stall_timeout):
        comm = job.create_communicator(
            args.communicator, args.allreduce_dtype, args.allow_no_cudnn,
            gpu_flag='--gpu' if args.gpu else '--device' if args.device
            .startswith('@cupy') else None, dtype=recipe.dtype,
            requested_gpu=None if args.gpu else job.requested_gpu(
                args.device))
        stop = signal_stop.SignalStop(comm)
        watchdog = job.start_watchdog(comm, args.stall_timeout)
    device = job.create_device(comm, args.device, args.gpu,
                               args.cudnn_autotune, args.cudnn_workspace)
    # The CPU engine's layers and update kernels on NumPy, Chainer's on GPUs
    layers, cpu_kernels = models.chainer_layers, None
    if device.xp is numpy:
        import cpu_engine  # oneDNN and OpenMP: for CPU runs only
        # keep freed buffers in the heap; check OMP_NUM_THREADS
        job.agree(comm, cpu_engine.cpu_runtime.configure)
        layers, cpu_kernels = cpu_engine, cpu_engine.updates
    numpy.random.seed(args.seed)

    # Read and check the datasets, the mean and the snapshot
    inputs = job.agree(comm, read_inputs, args, recipe, comm)
    train_set, n_class, mean = inputs.train, inputs.n_class, inputs.mean
    total_batchsize = inputs.total_batchsize
    nodes = job.node_ranks(comm.mpi_comm)
    if comm.rank == 0:
        print(nodes)
        print('workers: {}  minibatch per worker: {} x {} micro-batches  '
              'total minibatch: {}'.format(comm.size, args.batchsize,
                                           args.accumulate, total_batchsize))
        print('training images: {}  validation images: {}  classes: {} '
              '({})'.format(len(train_set), len(inputs.val), n_class,
                            image_data.class_count_source(args.train,
                                                          args.n_class)))

    # The iterators; on GPUs the images travel as uint8 and are normalized
    # on the device (a per-pixel mean: on the host)
    uint8_input = device.xp is not numpy and mean.ndim == 1
    transform_args = (args.crop_size, mean, args.resize,
                      args.skip_bad_images, args.decoder,
                      args.resize_whole_image, uint8_input,
                      args.max_image_mib << 20)
    transform = image_data.TrainTransform(*transform_args)
    converter = image_data.SkippingConverter(
        transform.normalize_batch if uint8_input else None)
    train_iter = job.agree(
        comm, image_data.GlobalOrderIterator, train_set, args.batchsize,
        transform, rank=comm.rank, n_workers=comm.size,
        micro_batches=args.accumulate, seed=args.seed,
        n_processes=args.loaderjob)
    val_iter = image_data.validation_iterator(
        inputs.val, comm.rank, comm.size,
        image_data.ValTransform(*transform_args),
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
    add_extensions(trainer, args, comm, stop, watchdog, inputs.config, model,
                   recipe, optimizer, val_iter, converter, length,
                   total_batchsize)

    # Run
    if comm.rank == 0:
        extensions.record_start(args.out, vars(args), dataclasses.asdict(
            recipe), comm.size, inputs.resume)
    if inputs.resume:
        with job.naming('--resume'):
            job.agree(comm, snapshots.load, inputs.resume, trainer)
        if comm.rank == 0:
            print('resuming from {} at iteration {} (epoch {:.2f})'.format(
                inputs.resume, updater.iteration, updater.epoch_detail),
                flush=True)
    with job.training(args.out):
        trainer.run(show_loop_exception_msg=False)
    job.check_stopped(stop, trainer, args.out, snapshots.SNAPSHOT_NAME)
    if comm.rank == 0:
        snapshots.AtomicWriter()(
            snapshots.MODEL_NAME, args.out, models.saved_model.trained(
                model.predictor, args.arch, args.width, n_class,
                extensions.last_validation(trainer), class_names=list(
                    getattr(train_set, 'class_names', None)
                    or image_data.class_names_of(args.train)),
                crop_size=args.crop_size, resize=args.resize, mean=mean,
                recipe=dataclasses.asdict(recipe)))
        print(extensions.summary_line(trainer), flush=True)
    if watchdog:
        watchdog.finish()


def add_extensions(trainer, args, comm, stop, watchdog, config, model,
                   recipe, optimizer, val_iter, converter, length,
                   total_batchsize):
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
    if watchdog:
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
    scheduled = extensions.add_schedules(
        trainer, recipes.hyperparameter_schedules(recipe, total_batchsize),
        optimizer)
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

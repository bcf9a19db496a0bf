#!/usr/bin/env python
"""Data-parallel ResNet-50 training on ImageNet with Chainer and ChainerMN.

    mpiexec -n 1024 python train_imagenet.py train.txt val.txt --root DIR --gpu

runs the recipe of Akiba, Suzuki & Fukuda (2017), "Extremely Large Minibatch
SGD: Training ResNet-50 on ImageNet in 15 Minutes". ``train`` and ``val`` are
the indexes of ImageNet's archives (``python -m image_data.archives``), list
files or class folders; with neither, the embedded demo data set.
"""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch import cuda_stack
cuda_stack.preload()  # pip's CUDA libraries, before CuPy loads (docs/gpu.md)

import chainer
from chainer import training

import communicators
import extensions
import image_data
from imagenet_job import arguments
from imagenet_job import Job
import models
from optimizers import recipes
import updaters


def main(argv=None):
    args = arguments.parse(argv)
    # MPI, the communicator, the device, --out, the resume, the job's end
    with Job.start(args) as job:
        train(args, job)


def train(args, job):
    comm, device, recipe = job.comm, job.device, job.recipe

    # The datasets, read on rank 0 and shared; the mean; the total minibatch
    inputs = job.read_inputs()
    train_iter, val_iter, converter = create_iterators(args, job, inputs)

    # The model: BN with final-batch statistics (the paper's), float16
    # activations and gradients under mixed16
    if recipe.dtype == 'mixed16':
        chainer.global_config.dtype = chainer.mixed16
    model = models.build_classifier(models.ClassifierSpec(
        inputs.n_class, args.arch, args.width, args.bn_stats,
        args.bn_variance, micro_batches=args.accumulate, dtype=recipe.dtype,
        zero_init=recipe.zero_init_residual,
        label_smoothing=recipe.label_smoothing), layers=job.layers)
    job.initialize(model.predictor)
    model.to_device(device)

    # The optimizer: RMSprop warm-up sliding into momentum SGD (akiba2017)
    # over the communicator's all-reduce, float16 by default (pure_nccl_fp16
    # on GPUs, mpi_fp16 on CPUs); rank 0's parameters broadcast up front
    optimizer = recipes.create_multi_node_optimizer(
        recipe, model, comm, job.update_kernels,
        mean_checked=job.abilities.checks_non_finite)
    communicators.broadcast_initial_parameters(
        optimizer, model, comm, world_nccl=job.abilities.world_nccl)

    # The updater: --accumulate micro-batches per update, each a virtual
    # worker with its own BN statistics (and, with the float16 all-reduce,
    # its gradient rounded as a worker's would be)
    rounded = (job.abilities.rounds_to_float16
               and args.virtual_worker_rounding == 'on')
    updater = updaters.MicroBatchUpdater(
        train_iter, optimizer, converter, device, args.accumulate,
        args.on_non_finite, recipes.create_loss_scale(recipe),
        rounded_workers=comm.size * args.accumulate if rounded else None,
        progress=job.progress)

    # The trainer, stopped by the length or a stop signal
    length = ((args.iterations, 'iteration') if args.iterations
              else (args.epoch, 'epoch'))
    trainer = training.Trainer(updater, job.stop_trigger(length),
                               out=args.out)
    job.watch(trainer)
    add_extensions(trainer, args, job, val_iter, converter, length,
                   inputs.total_batchsize)

    # Run: resume where a snapshot was found, train, save model.npz
    job.run(trainer)


def create_iterators(args, job, inputs):
    """One global order of the training set over the workers' micro-batches,
    each worker's shard of the validation set, and the converter; on GPUs
    the images travel as uint8 and are normalized on the device (a
    per-pixel mean: on the host)."""
    comm = job.comm
    uint8_input = job.on_gpu and inputs.mean.ndim == 1
    crop = dict(crop_size=args.crop_size, mean=inputs.mean,
                resize=args.resize, skip_bad_images=args.skip_bad_images,
                decoder=args.decoder,
                resize_whole_image=args.resize_whole_image,
                uint8_output=uint8_input,
                max_image_bytes=args.max_image_mib << 20)
    transform = image_data.TrainTransform(**crop)
    converter = image_data.SkippingConverter(
        transform.normalize_batch if uint8_input else None)
    train_iter = image_data.GlobalOrderIterator(
        inputs.train, args.batchsize, transform, rank=comm.rank,
        n_workers=comm.size, micro_batches=args.accumulate, seed=args.seed,
        n_processes=args.loaderjob)
    val_iter = image_data.validation_iterator(
        inputs.val, comm.rank, comm.size, image_data.ValTransform(**crop),
        args.val_batchsize, args.loaderjob, limit=64 if args.test else None)
    return train_iter, val_iter, converter


def add_extensions(trainer, args, job, val_iter, converter, length,
                   total_batchsize):
    """Validation, at the end too (the closing line scores model.npz); the
    final-batch BN statistics averaged over the workers; throughput; the
    schedules (slow-start learning rate, the warm-up's slide); rank 0's
    snapshots, log and plots."""
    comm, optimizer = job.comm, trainer.updater.get_optimizer('main')
    model = optimizer.target
    val_trigger = length if args.test else extensions.AnyOfTriggers(
        [(args.val_interval, 'epoch'), length])
    trainer.extend(extensions.DistributedEvaluator(
        val_iter, model.predictor, comm, converter, job.device,
        progress=job.progress), trigger=val_trigger)
    if args.bn_stats == 'final-batch':
        trainer.extend(extensions.SyncFinalBatchStatistics(
            model, comm, [val_trigger] + job.snapshot_triggers(length)))
    trainer.extend(extensions.Throughput(total_batchsize))
    scheduled = extensions.add_schedules(
        trainer, recipes.hyperparameter_schedules(
            job.recipe, total_batchsize), optimizer)
    if trainer.updater.loss_scale is not None:
        scheduled += ['loss_scale', 'overflows']
    job.extend_writers(trainer, length, scheduled, val_trigger)


if __name__ == '__main__':
    main()

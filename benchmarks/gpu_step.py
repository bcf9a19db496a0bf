#!/usr/bin/env python
"""Images/s of the trainer's ResNet-50 step on one GPU, Chainer and PyTorch.

    python -m benchmarks.gpu_step [--device 0] [--size 224]
        [--batchsizes 32 128] [--dtypes float32 mixed16] [--warmup 5]
        [--steps 20] [--no-torch] [--json PATH]

A step is the trainer's update on one rank: ``MicroBatchUpdater`` runs the
forward pass with final-batch BN (``FinalBatchNormalization``), the
label-smoothed loss, the backward pass (with ``mixed16``: float16
activations and gradients, the dynamic loss scale, float32 masters), the
communicator's gradient mean (``pure_nccl_fp16`` on one rank; ``naive`` on
the CPU), ``NonFiniteGradientGuard``, weight decay and the paper's optimizer
(RMSprop warm-up at its epoch-0 values, ``--recipe`` to change), on random
data, with the learning rate at 0 as in benchmarks/train_step.py, so every
step sees the same numbers. The GPU is synchronized after every step; the
figure is the median images/s of the timed steps after the warm-up steps.
The first step (CUDA's kernel compilation, or loading from CuPy's kernel
cache, and cuDNN's autotuning) is timed apart, and the memory pool's
reserved bytes after the steps (the pool keeps what it freed, so this is
its peak) are reported with each row.
Where PyTorch with CUDA is importable, the same network and update
(:func:`benchmarks.train_step.torch_step`, float32, plain BN, no
communicator) run on the same GPU in the same process, and the float32 rows
carry the ratio. Both autotune cuDNN (Chainer as the trainer sets it,
:func:`cuda_stack.configure_cudnn`; PyTorch with ``cudnn.benchmark``), with
TF32 convolutions allowed on GPUs that have them. ``--device -1`` runs on
the CPU (Chainer's own functions), a check of the script where there is no
GPU.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch import cuda_stack
cuda_stack.preload()  # before chainer: pip's CUDA libraries (docs/gpu.md)

import chainer  # NOQA: E402
import numpy  # NOQA: E402

from benchmarks import train_step  # NOQA: E402
import communicators  # NOQA: E402
from largebatch import errors  # NOQA: E402
from largebatch import outputs  # NOQA: E402
import models  # NOQA: E402
from optimizers import recipes  # NOQA: E402
from imagenet_job import arguments  # NOQA: E402
import updaters  # NOQA: E402


class SameBatch(chainer.dataset.Iterator):
    """Hands the updater the same batch over and over (the converter holds
    it on the device)."""

    epoch, epoch_detail, is_new_epoch = 0, 0.0, False

    def __next__(self):
        return None


def chainer_step(device, comm, size, batchsize, recipe,
                 abilities=communicators.abilities('naive')):
    """The trainer's update on ``device`` as a closure, and the optimizer;
    ``abilities`` are ``comm``'s (:class:`communicators.Abilities`).

    Built as train_imagenet.py builds it (:func:`models.build_classifier`,
    :func:`optimizers.recipes.create_multi_node_optimizer`, the parameters
    broadcast before the first step), with the learning rate at 0.
    """
    mixed16 = recipe.dtype == 'mixed16'
    model = models.build_classifier(models.ClassifierSpec(
        1000, dtype=recipe.dtype, zero_init=recipe.zero_init_residual,
        label_smoothing=recipe.label_smoothing))
    model.to_device(device)
    optimizer = recipes.create_multi_node_optimizer(
        recipe, model, comm, mean_checked=abilities.checks_non_finite)
    communicators.broadcast_initial_parameters(
        optimizer, model, comm, world_nccl=abilities.world_nccl)
    actual = optimizer.actual_optimizer
    for attr, schedule in recipes.hyperparameter_schedules(
            recipe, batchsize).items():
        setattr(actual, attr, schedule(0.0))
    actual.lr = 0
    rng = numpy.random.RandomState(1)
    x = device.send(rng.randn(batchsize, 3, size, size).astype(numpy.float32))
    t = device.send(rng.randint(0, 1000, batchsize).astype(numpy.int32))
    updater = updaters.MicroBatchUpdater(
        SameBatch(), optimizer, lambda batch, device: (x, t), device, 1,
        'stop', recipes.create_loss_scale(recipe))

    reporter = chainer.Reporter()  # what the updater reports goes here
    reporter.add_observer('main', model)

    def step():
        with chainer.using_config('dtype', chainer.mixed16 if mixed16
                                  else numpy.float32), reporter.scope({}):
            updater.update()
    return step, actual


def timed_steps(step, synchronize, batchsize, warmup, steps):
    """``(median images/s over steps synchronized steps after warmup,
    seconds of the first step)``; the first step is one of the warm-up
    steps when there are any."""
    times = []
    for _ in range(max(warmup, 1) + steps):
        start = time.perf_counter()
        step()
        synchronize()
        times.append(time.perf_counter() - start)
    return batchsize / float(numpy.median(times[-steps:])), times[0]


def torch_device(device_id, no_torch):
    """The torch device of the same GPU, or None where PyTorch can't run."""
    torch = train_step.torch
    if no_torch or torch is None:
        return None
    if device_id < 0:
        return torch.device('cpu')
    if not torch.cuda.is_available():
        return None
    torch.backends.cudnn.benchmark = True  # as Chainer's autotune
    return torch.device('cuda', device_id)


def benchmark(args):
    """Figures of every dtype and batch size, as a dict (also printed)."""
    if args.device < 0:
        device = chainer.get_device('@numpy')
        name, synchronize = 'CPU', (lambda: None)
        comm = communicators.create_communicator('naive')
        abilities = communicators.abilities('naive')
    else:
        device = chainer.get_device('@cupy:{}'.format(args.device))
        device.use()
        cuda_stack.configure_cudnn()
        name, synchronize = (cuda_stack.stack_line(args.device),
                             device.device.synchronize)
        comm = communicators.create_communicator('pure_nccl', 'float16',
                                                 gpu=True)
        abilities = communicators.abilities('pure_nccl_fp16')
    tdevice = torch_device(args.device, args.no_torch)
    torch = train_step.torch
    result = {'device': name, 'size': args.size, 'warmup': args.warmup,
              'steps': args.steps, 'recipe': args.recipe.optimizer,
              'weight_decay': args.recipe.weight_decay,
              'communicator': type(comm).__name__,
              'pytorch': torch.__version__ if tdevice else None,
              'rows': []}
    print(name)
    for dtype in args.dtypes:
        recipe = dataclasses.replace(args.recipe, dtype=dtype, **(
            recipes.MIXED16_DEFAULTS if dtype == 'mixed16' else
            dict(loss_scale=None, loss_scale_interval=None)))
        for batchsize in args.batchsizes:
            step, optimizer = chainer_step(device, comm, args.size,
                                           batchsize, recipe, abilities)
            speed, first = timed_steps(step, synchronize, batchsize,
                                       args.warmup, args.steps)
            row = {'dtype': dtype, 'batchsize': batchsize, 'chainer': speed,
                   'first_step_s': first}
            if args.device >= 0:
                row['memory_pool_mib'] = device.xp.get_default_memory_pool(
                    ).total_bytes() / 2 ** 20
            del step
            if tdevice is not None and dtype == 'float32':
                tstep = train_step.torch_step(args.size, batchsize, optimizer,
                                              recipe, tdevice)
                tsync = (torch.cuda.synchronize if tdevice.type == 'cuda'
                         else (lambda: None))
                row['pytorch'] = timed_steps(tstep, tsync, batchsize,
                                             args.warmup, args.steps)[0]
                row['chainer/pytorch'] = row['chainer'] / row['pytorch']
                del tstep
            pool = ('' if 'memory_pool_mib' not in row else
                    ', pool {:.0f} MiB'.format(row['memory_pool_mib']))
            print('  {}x{} px, {:7s}, batch {:4d}: Chainer {:8.1f} images/s '
                  '(first step {:.1f} s{}){}'
                  .format(args.size, args.size, dtype, batchsize,
                          row['chainer'], first, pool,
                          '' if 'pytorch' not in row else
                          ', PyTorch {:8.1f} images/s, Chainer/PyTorch {:.2f}'
                          .format(row['pytorch'], row['chainer/pytorch'])))
            result['rows'].append(row)
            if args.device >= 0:
                device.xp.get_default_memory_pool().free_all_blocks()
                if tdevice is not None:
                    torch.cuda.empty_cache()
    return result


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', '-d', type=int, default=0,
                        help='GPU id; -1: the CPU (default: 0)')
    parser.add_argument('--size', type=int, default=224,
                        help='input side in pixels (default: 224)')
    parser.add_argument('--batchsizes', '-b', type=int, nargs='+',
                        default=[32, 128],
                        help='per-GPU batch sizes (default: 32 128)')
    parser.add_argument('--dtypes', nargs='+', default=['float32'],
                        choices=recipes.DTYPES,
                        help='float32 and/or mixed16 (default: float32)')
    parser.add_argument('--warmup', type=int, default=5,
                        help='untimed steps first (default: 5)')
    parser.add_argument('--steps', type=int, default=20,
                        help='timed steps (default: 20)')
    parser.add_argument('--no-torch', action='store_true',
                        help='skip the PyTorch comparison')
    parser.add_argument('--json', help='also write the figures here')
    arguments.add_recipe_arguments(parser)
    args = parser.parse_args(argv)
    if args.warmup < 0:
        parser.error('--warmup must be non-negative, got {}'.format(
            args.warmup))
    if args.steps < 1:
        parser.error('--steps must be positive, got {}'.format(args.steps))
    if min(args.batchsizes) < 1:
        parser.error('--batchsizes must be positive, got {}'.format(
            ' '.join(map(str, args.batchsizes))))
    if args.size < 32:
        parser.error('--size must be at least 32 pixels, got {}'.format(
            args.size))
    try:
        args.recipe = arguments.recipe_of(args)
    except errors.ParameterError as e:
        parser.error(str(e))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.device >= 0:
        try:
            cuda_stack.check(allow_no_cudnn=True, requested=args.device)
        except errors.InputError as e:
            print('gpu_step: --device {}: {}'.format(args.device, e),
                  file=sys.stderr)
            sys.exit(2)
    result = benchmark(args)
    if args.json:
        directory = os.path.dirname(args.json)
        if directory:
            os.makedirs(directory, exist_ok=True)
        outputs.write_replacing(args.json, lambda f: json.dump(
            result, f, indent=2), force=True, text=True)


if __name__ == '__main__':
    main()

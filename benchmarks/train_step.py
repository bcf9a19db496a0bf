#!/usr/bin/env python
"""Images/s of one ResNet-50 training step on CPU, against the GEMM peak.

    python -m benchmarks.train_step [--sizes 224 64] [--batchsize 32]
        [--steps 5] [--rounds 3] [--stock] [--channel-major] [--unfused]
        [--blas-threads] [--no-torch] [--no-configure]
        [--transform] [--profile]

A step is the project's: forward, softmax cross-entropy, backward and the
recipe's optimizer update (``--recipe``, RMSprop warm-up by default, with
weight decay), fp32, on random data, with the learning rate at 0: the step
does all of its arithmetic, but the parameters keep their initial values,
so every timed step sees the same numbers (training on one fixed batch
drives the logits apart within a few steps, and the denormal softmax
probabilities that follow slow OpenBLAS's GEMMs 10-30x). For every input
size it prints the median images/s over ``rounds x steps`` timed steps
after a warm-up step, the convolution and linear FLOPs per image (forward,
and the two backward GEMMs; none for the input image's gradient) and the
fraction of the GEMM peak, measured in the same run as the median GFLOP/s
of a 2048^3 NumPy matmul; the best step's images/s, the least disturbed by
other processes on a shared machine, comes with it. ``--stock`` also times
the same model with the fast paths of :mod:`cpu_engine` off (Chainer's own
CPU functions), ``--channel-major`` with channel-major activations
(``chainer-cm``) where the engine keeps them channels-last, ``--unfused``
with batch normalization and the ReLU after it as two nodes
(``chainer-unfused``), ``--blas-threads`` with NumPy's BLAS on as many
threads as ours rather than the one :func:`cpu_runtime.configure` leaves it
(``chainer-blas``). If PyTorch is
importable it times the same network written in PyTorch (eager) with the
same update (:func:`torch_update`), in both of
its memory formats, NCHW (``pytorch``) and channels-last (``pytorch-cl``),
and prints the ratio to each and to the faster of the two in this run
(``pytorch-best``).
Rounds alternate the implementations so that machine noise hits all of them
alike; the spread of the per-round ratios is printed too. ``--profile``
also prints where the time of ``--steps`` more steps goes, by kind of work
(:mod:`benchmarks.step_profile`). ``--transform``
also prints the per-core images/s of the training transform (decode,
resize, random crop, flip, mean subtraction) on a synthetic ImageNet-sized
JPEG.
"""
import argparse
import contextlib
import os
import tempfile
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainer.links as L
import numpy
from PIL import Image

from benchmarks import step_profile
import cpu_engine
from cpu_engine import cpu_runtime
from cpu_engine import updates
import image_data
from largebatch import errors
import models
from optimizers import recipes
from optimizers.corrected_momentum_sgd import CorrectedMomentumSGD
from optimizers.rmsprop_warmup import RMSpropWarmup
from imagenet_job import arguments

try:
    import threadpoolctl
except ImportError:  # optional, as for cpu_runtime.configure
    threadpoolctl = None
try:
    import torch
except ImportError:  # PyTorch is optional: only the comparison needs it
    torch = None

PEAK_N = 2048
TRANSFORM_REPEATS = 200


def gemm_peak(repeats=5):
    """Median GFLOP/s of a float32 NumPy matmul of PEAK_N^3 on
    :func:`cpu_runtime.num_threads` threads (the BLAS's, which
    :func:`cpu_runtime.configure` otherwise leaves one)."""
    a = numpy.random.RandomState(0).rand(PEAK_N, PEAK_N).astype(
        numpy.float32)
    times = []
    with _blas_threads(cpu_runtime.num_threads()):
        a.dot(a)
        for _ in range(repeats):
            start = time.perf_counter()
            a.dot(a)
            times.append(time.perf_counter() - start)
    return 2 * PEAK_N ** 3 / numpy.median(times) / 1e9


def _with_blas_threads(step):
    """``step`` run with NumPy's BLAS on :func:`cpu_runtime.num_threads`
    threads."""
    def run():
        with _blas_threads(cpu_runtime.num_threads()):
            step()
    return run


def _blas_threads(n):
    """A context with NumPy's BLAS on ``n`` threads, where threadpoolctl
    is installed."""
    if threadpoolctl is None:
        return contextlib.nullcontext()
    return threadpoolctl.threadpool_limits(n, user_api='blas')


class FlopCounter(chainer.LinkHook):
    """Counts the multiply-adds of convolutions and linear layers (x2).

    Training FLOPs are three times the forward ones, less the input
    gradient of a layer whose input needs none (the first convolution).
    """

    name = 'FlopCounter'

    def __init__(self):
        self.forward = 0
        self.training = 0

    def forward_postprocess(self, args):
        if not isinstance(args.link, (L.Convolution2D, L.Linear)):
            return
        # Multiply-adds per output element: C kh kw, or the input size.
        flops = 2 * numpy.prod(args.link.W.shape[1:]) * args.out.size
        x = args.args[0]
        needs_gx = isinstance(x, chainer.Variable) and x.requires_grad
        self.forward += flops
        self.training += flops * (3 if needs_gx else 2)


def frozen_optimizer(model, recipe, batchsize):
    """The recipe's optimizer on ``model`` at its epoch-0 values, lr 0, with
    the CPU engine's update kernels, as the trainer sets it up on CPUs.

    The update does all of its arithmetic but leaves the weights as they
    were, so every timed step sees the same numbers (see the module's
    docstring for why that matters on CPUs).
    """
    optimizer = recipes.create_optimizer(recipe, updates)
    for attr, schedule in recipes.hyperparameter_schedules(
            recipe, batchsize).items():
        setattr(optimizer, attr, schedule(0.0))
    optimizer.lr = 0
    optimizer.setup(model)
    recipes.add_hooks(optimizer, recipe, updates)
    return optimizer


def chainer_step(size, batchsize, recipe):
    """A closure running one training step, its FLOPs per image, optimizer.

    The model is the trainer's (:func:`models.build_classifier`) on the CPU
    engine's layers, as the trainer builds it on CPUs, with moving-average
    BN as the PyTorch network beside it has; ``chainer.config.
    cpu_fast_paths = False`` runs Chainer's own functions through the same
    layers (``--stock``).
    """
    model = models.build_classifier(models.ClassifierSpec(
        1000, bn_stats='moving-average', zero_init=recipe.zero_init_residual,
        label_smoothing=recipe.label_smoothing), layers=cpu_engine)
    optimizer = frozen_optimizer(model, recipe, batchsize)
    rng = numpy.random.RandomState(1)
    x = rng.randn(batchsize, 3, size, size).astype(numpy.float32)
    t = rng.randint(0, 1000, batchsize).astype(numpy.int32)

    def step():
        optimizer.update(model, x, t)
    counter = FlopCounter()
    with counter:
        step()
    return step, counter.training / batchsize, optimizer


def torch_update(model, optimizer, recipe):
    """The update of the Chainer ``optimizer`` for a PyTorch ``model``.

    Weight decay (``g += rate theta``, with the recipe's exemptions: BN's
    weight and bias are gamma and beta, the linear bias is ``b``), then
    RMSprop warm-up at the optimizer's hyperparameters, or momentum SGD
    (with or without momentum correction), written with PyTorch's
    multi-tensor ``_foreach`` kernels as its own optimizers are.
    """
    exempt = recipes.WEIGHT_DECAY_EXEMPT[recipe.weight_decay_exempt]
    decayed, params = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            params.append(p)
            is_bn = isinstance(module, torch.nn.BatchNorm2d)
            if not ((is_bn and 'gamma' in exempt)
                    or (not is_bn and name == 'bias' and 'b' in exempt)):
                decayed.append(p)
    hp = optimizer.hyperparam
    deltas = [torch.zeros_like(p) for p in params]
    squares = ([torch.zeros_like(p) for p in params]
               if isinstance(optimizer, RMSpropWarmup) else None)

    def update():
        if recipe.weight_decay > 0:
            torch._foreach_add_([p.grad for p in decayed], decayed,
                                alpha=recipe.weight_decay)
        grads = [p.grad for p in params]
        if isinstance(optimizer, CorrectedMomentumSGD):
            # v = momentum v - g; theta += lr v.
            torch._foreach_mul_(deltas, hp.momentum)
            torch._foreach_sub_(deltas, grads)
            torch._foreach_add_(params, deltas, alpha=hp.lr)
            return
        if not isinstance(optimizer, RMSpropWarmup):
            # Chainer's MomentumSGD: v = momentum v - lr g; theta += v.
            torch._foreach_mul_(deltas, hp.momentum)
            torch._foreach_add_(deltas, grads, alpha=-hp.lr)
            torch._foreach_add_(params, deltas)
            return
        torch._foreach_mul_(squares, hp.mu2)
        torch._foreach_addcmul_(squares, grads, grads, value=1 - hp.mu2)
        if hp.alpha_rmsprop:
            scale = torch._foreach_sqrt(squares)
            torch._foreach_add_(scale, hp.eps)
            torch._foreach_reciprocal_(scale)
            torch._foreach_mul_(scale, hp.alpha_rmsprop)
            torch._foreach_add_(scale, hp.alpha_sgd)
            torch._foreach_mul_(scale, grads)
        else:
            scale = torch._foreach_mul(grads, hp.alpha_sgd)
        torch._foreach_mul_(deltas, hp.mu1)
        torch._foreach_sub_(deltas, scale)
        torch._foreach_add_(params, deltas, alpha=hp.lr)
    return update


def torch_step(size, batchsize, optimizer, recipe, device='cpu',
               memory_format=None):
    """The same network and step in PyTorch (eager), with the same update,
    on the torch ``device``; model and input in ``memory_format``
    (``torch.channels_last``), else NCHW."""
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, in_size, ch, out_size, stride):
            super(Bottleneck, self).__init__()
            self.conv1 = nn.Conv2d(in_size, ch, 1, stride, bias=False)
            self.bn1 = nn.BatchNorm2d(ch, eps=2e-5)
            self.conv2 = nn.Conv2d(ch, ch, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(ch, eps=2e-5)
            self.conv3 = nn.Conv2d(ch, out_size, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out_size, eps=2e-5)
            self.shortcut = None
            if in_size != out_size or stride != 1:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_size, out_size, 1, stride, bias=False),
                    nn.BatchNorm2d(out_size, eps=2e-5))

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = torch.relu(self.bn2(self.conv2(h)))
            h = self.bn3(self.conv3(h))
            s = x if self.shortcut is None else self.shortcut(x)
            return torch.relu(h + s)

    class ResNet50(nn.Module):
        def __init__(self):
            super(ResNet50, self).__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64, eps=2e-5)
            blocks = []
            for n, in_size, ch, out_size, stride in (
                    (3, 64, 64, 256, 1), (4, 256, 128, 512, 2),
                    (6, 512, 256, 1024, 2), (3, 1024, 512, 2048, 2)):
                blocks.append(Bottleneck(in_size, ch, out_size, stride))
                blocks += [Bottleneck(out_size, ch, out_size, 1)
                           for _ in range(n - 1)]
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = nn.functional.max_pool2d(h, 3, 2, 1)
            return self.fc(self.blocks(h).mean((2, 3)))

    model = ResNet50().to(device)
    x = torch.randn(batchsize, 3, size, size, device=device)
    if memory_format is not None:
        model = model.to(memory_format=memory_format)
        x = x.to(memory_format=memory_format)
    update = torch_update(model, optimizer, recipe)
    t = torch.randint(0, 1000, (batchsize,), device=device)

    def step():
        model.zero_grad()
        nn.functional.cross_entropy(model(x), t).backward()
        with torch.no_grad():
            update()
    step()
    return step


def _time(step, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def _configured(step, name, value):
    """``step`` run with ``chainer.config.<name> = value``."""
    def run():
        with chainer.using_config(name, value):
            step()
    return run


def rates(times, batchsize):
    """Images/s per implementation from ``{name: [[seconds per step] per
    round]}``: the median over all steps, per round, and of the best step.
    """
    median, per_round, best = {}, {}, {}
    for name, rounds in times.items():
        per_step = [t for r in rounds for t in r]
        median[name] = batchsize / numpy.median(per_step)
        per_round[name] = [batchsize / numpy.median(r) for r in rounds]
        best[name] = batchsize / min(per_step)
    return median, per_round, best


def faster(median, names):
    """The one of ``names`` with the most images/s in ``median``."""
    return max(names, key=median.__getitem__)


def ratio_line(ours, other, median, per_round, best, label=None):
    """``ours / other`` of the median images/s, per round and of the best
    steps; ``label`` names ``other`` (``pytorch-best``), which follows."""
    per_round = ' '.join('{:.2f}'.format(a / b) for a, b in zip(
        per_round[ours], per_round[other]))
    if label is not None:
        per_round = '{}; per round {}'.format(other, per_round)
    else:
        per_round = 'per round ' + per_round
    return '  {} / {:<13} {:5.2f}  ({}; best steps {:.2f})'.format(
        ours, label or other, median[ours] / median[other], per_round,
        best[ours] / best[other])


def print_profile(step, optimizer, steps):
    """Runs ``steps`` steps under :class:`StepProfile` and prints seconds
    per step by kind of work."""
    with step_profile.StepProfile(optimizer) as profile:
        for _ in range(steps):
            step()
    seconds = profile.per_step(steps)
    total = sum(seconds.values())
    print('  profile, chainer, mean of {} steps of {:.3f} s:'.format(
        steps, total))
    for kind in step_profile.KINDS:
        print('    {:<22} {:7.3f} s  {:4.0%}'.format(
            kind, seconds[kind], seconds[kind] / total))


def benchmark(size, args):
    peak = gemm_peak()
    fast, flops, optimizer = chainer_step(size, args.batchsize,
                                          args.recipe)
    steps = {'chainer': fast}
    if args.stock:
        steps['chainer-stock'] = _configured(fast, 'cpu_fast_paths', False)
        steps['chainer-stock']()
    if args.channel_major:
        steps['chainer-cm'] = _configured(fast, 'cpu_channels_last', False)
        steps['chainer-cm']()
    if args.unfused:
        steps['chainer-unfused'] = _configured(fast, 'cpu_fused_relu',
                                               False)
        steps['chainer-unfused']()
    if args.blas_threads:
        steps['chainer-blas'] = _with_blas_threads(fast)
    if torch is not None and not args.no_torch:
        steps['pytorch'] = torch_step(size, args.batchsize, optimizer,
                                      args.recipe)
        steps['pytorch-cl'] = torch_step(
            size, args.batchsize, optimizer, args.recipe,
            memory_format=torch.channels_last)
    times = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            times[name].append(_time(step, args.steps))
    peak = numpy.median([peak, gemm_peak()])
    print('size {0}x{0}, batch {1}, {2} threads: GEMM peak {3:.0f} GFLOP/s, '
          '{4:.2f} GFLOP per image'.format(
              size, args.batchsize, cpu_runtime.num_threads(), peak,
              flops / 1e9))
    median, per_round, best = rates(times, args.batchsize)
    for name, rounds in times.items():
        per_step = [t for r in rounds for t in r]
        print('  {:<14} {:7.2f} images/s  {:6.1f} GFLOP/s = {:4.0%} of peak '
              '(best step {:.2f} images/s, steps {:.2f}..{:.2f} s)'.format(
                  name, median[name], median[name] * flops / 1e9,
                  median[name] * flops / 1e9 / peak, best[name],
                  min(per_step), max(per_step)))
    for other in ('pytorch', 'pytorch-cl', 'chainer-stock', 'chainer-cm',
                  'chainer-unfused', 'chainer-blas'):
        if other in median:
            print(ratio_line('chainer', other, median, per_round, best))
    if 'pytorch' in median:
        fastest = faster(median, ('pytorch', 'pytorch-cl'))
        print(ratio_line('chainer', fastest, median, per_round, best,
                         label='pytorch-best'))
    if args.profile:
        print_profile(fast, optimizer, args.steps)


def transform_rate(crop_size, n):
    """Per-core images/s of the training transform on an ImageNet-like JPEG.

    The image is a synthetic 500x375 photo-like JPEG (ImageNet's typical
    size, quality 90), timed in process CPU time over ``n`` calls; prints
    the decode+resize and normalization times too.
    """
    rng = numpy.random.default_rng(0)
    yy, xx = numpy.mgrid[0:375, 0:500]
    pixels = numpy.stack([128 + 100 * numpy.sin(xx / 17. + c)
                          * numpy.cos(yy / 23.) for c in range(3)], -1)
    pixels = (pixels + rng.normal(0, 12, pixels.shape)).clip(0, 255)
    mean = image_data.load_mean(None, image_data.resize_for(crop_size))
    transform = image_data.TrainTransform(crop_size, mean)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, 'image.jpg')
        Image.fromarray(pixels.astype(numpy.uint8)).save(path, quality=90)
        image = transform._load(path)
        parts = {
            'total': lambda: transform((path, 0), rng),
            'decode+resize': lambda: transform._load(path),
            'normalize': lambda: transform._normalize(
                image[3:3 + crop_size, 5:5 + crop_size], 3, 5, True),
        }
        seconds = {}
        for name, fn in parts.items():
            fn()
            start = time.process_time()
            for _ in range(n):
                fn()
            seconds[name] = (time.process_time() - start) / n
    print('training transform, {} px crop, one core: {:.0f} images/s '
          '({})'.format(crop_size, 1 / seconds['total'], ', '.join(
              '{} {:.2f} ms'.format(k, v * 1e3) for k, v in seconds.items())))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', type=int, nargs='+', default=[224, 64],
                        help='input sides in pixels (default: 224 64)')
    parser.add_argument('--batchsize', '-b', type=int, default=32)
    parser.add_argument('--steps', type=int, default=5,
                        help='timed steps per round (default: 5)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='alternating rounds (default: 3)')
    parser.add_argument('--channel-major', action='store_true',
                        help='also time our step with channel-major '
                        'activations (chainer-cm) where it keeps them '
                        'channels-last')
    parser.add_argument('--unfused', action='store_true',
                        help='also time our step with batch normalization '
                        'and the ReLU after it as two nodes '
                        '(chainer-unfused)')
    parser.add_argument('--blas-threads', action='store_true',
                        help='also time our step with NumPy\'s BLAS on as '
                        'many threads as ours (chainer-blas)')
    parser.add_argument('--stock', action='store_true',
                        help='also time Chainer\'s own CPU functions')
    parser.add_argument('--no-torch', action='store_true',
                        help='skip the PyTorch comparison')
    parser.add_argument('--no-configure', action='store_true',
                        help='keep glibc\'s default allocator settings and '
                        'the BLAS\'s threads (cpu_runtime.configure)')
    parser.add_argument('--transform', action='store_true',
                        help='also time the training transform per core')
    parser.add_argument('--profile', action='store_true',
                        help='also print where the time of --steps more of '
                        'our steps goes, by kind of work')
    arguments.add_recipe_arguments(parser)
    args = parser.parse_args(argv)
    for flag in ('batchsize', 'steps', 'rounds'):
        if getattr(args, flag) < 1:
            parser.error('--{} must be a positive integer, got {}'.format(
                flag, getattr(args, flag)))
    if any(s < 32 for s in args.sizes):
        parser.error('--sizes must be at least 32 pixels, got {}'.format(
            ' '.join(map(str, args.sizes))))
    try:
        args.recipe = arguments.recipe_of(args)
    except errors.ParameterError as e:
        parser.error(str(e))
    return args


def main(argv=None):
    args = parse_args(argv)
    if not args.no_configure:
        cpu_runtime.configure()
    if torch is not None:
        torch.set_num_threads(cpu_runtime.num_threads())
    for size in args.sizes:
        benchmark(size, args)
    if args.transform:
        transform_rate(max(args.sizes), TRANSFORM_REPEATS)


if __name__ == '__main__':
    main()

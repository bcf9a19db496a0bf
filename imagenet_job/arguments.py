"""The training script's command line: every flag and its default, the
defaults that depend on other flags, the checks argparse cannot make, and the
recipe the flags resolve to.

The flags live with the job, above the packages, which take values only;
``benchmarks/`` reads the recipe flags from here too."""
import argparse
import math
import re

from largebatch import cuda_stack
from largebatch import errors
import image_data
from image_data import demo
import models
from optimizers import recipes
from optimizers import schedules

DESCRIPTION = 'Data-parallel ResNet-50 training on ImageNet with Chainer ' \
    'and ChainerMN.'


def build_parser():
    """The trainer's parser: its flags in the groups ``--help`` shows."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)

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
    add('--max-image-mib', type=int, default=64,
        help='an image of more MiB is a bad image, not read (default: '
        '%(default)s)')
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
        help='end the job (exit 5) when a worker is silent, or makes no '
        'progress in any phase, this long; 0: never (default: %(default)s)')
    add_recipe_arguments(parser)
    return parser


def _count_or_auto(text):
    return text if text == 'auto' else int(text)


#: The ``--device`` values this script accepts.
_DEVICE = re.compile(r'^(-1|@numpy|@intel64|@cupy:\d+)$')


def parse(argv=None):
    """The flags of ``argv`` with the defaults that depend on others filled
    in: the demo data set without ``train``/``val``, its 3 epochs and 32 px
    crops, the resize side from the crop, and ``--test``'s short run."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.train is None) != (args.val is None) or args.demo and args.train:
        parser.error('give the training and validation sets, or --demo')
    if args.train is None:
        args.demo, args.train, args.val = True, demo.TRAIN_DIR, demo.VAL_DIR
    epoch, crop_size = (3, demo.CROP_SIZE) if args.demo else (90, 224)
    args.epoch = epoch if args.epoch is None else args.epoch
    args.crop_size = crop_size if args.crop_size is None else args.crop_size
    args.resize = args.resize or image_data.resize_for(args.crop_size)
    if args.test:
        args.log_interval, args.iterations = 1, args.iterations or 5
    return args


def flag_names():
    """The name of each flag by its attribute, as errors name it: ``lr`` ->
    ``--lr``, ``val_batchsize`` -> ``--val-batchsize``; the positional
    ``train`` and ``val`` as themselves."""
    return {action.dest: '--' + action.dest.replace('_', '-')
            if action.option_strings else action.dest
            for action in build_parser()._actions}


def recipe_of(args, epochs=schedules.REFERENCE_EPOCHS):
    """The :class:`optimizers.recipes.Recipe` of ``--recipe`` with every
    recipe flag given (:func:`add_recipe_arguments`) applied; raises
    :class:`errors.ParameterError` naming the setting."""
    return recipes.resolve(args.recipe, epochs, **{
        name: getattr(args, name) for name in recipes.OVERRIDES})


def check(args):
    """Raises :class:`errors.ParameterError` naming the first value that
    argparse lets through but training cannot take."""
    checks = [(name, math.isfinite(value), 'finite')
              for name, value in sorted(vars(args).items())
              if isinstance(value, float)]
    checks += [(name, getattr(args, name) > 0, 'positive') for name in (
        'batchsize', 'val_batchsize', 'epoch', 'width',
        'log_interval', 'keep_snapshots', 'val_interval',
        'snapshot_interval', 'resize', 'max_image_mib')] + [
        ('iterations', args.iterations is None or args.iterations > 0,
         'positive'),
        ('accumulate', args.accumulate == 'auto' or args.accumulate > 0,
         'positive or auto'),
        ('n_class', args.n_class is None or args.n_class > 0, 'positive'),
        ('snapshot_iterations', args.snapshot_iterations >= 0,
         'non-negative (0: off)'),
        ('stall_timeout', args.stall_timeout >= 0, 'non-negative (0: never)'),
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
            raise errors.ParameterError(name, getattr(args, name), expected)


def _switch(group, name, help_text):
    """``--name`` / ``--no-name`` setting ``name`` to True / False."""
    flag = '--' + name.replace('_', '-')
    group.add_argument(flag, dest=name, action='store_true', default=None,
                       help=help_text)
    group.add_argument('--no-' + flag[2:], dest=name, action='store_false',
                       default=None, help='turn {} off'.format(flag))


def add_recipe_arguments(parser):
    """Adds ``--recipe`` and one flag per setting of
    :data:`optimizers.recipes.OVERRIDES`.

    Every flag defaults to None (the recipe's value), so :func:`recipe_of`
    applies exactly the flags given.
    """
    group = parser.add_argument_group(
        'optimization recipe',
        'a recipe sets the defaults; each flag below overrides its part')
    group.add_argument('--recipe', choices=sorted(recipes.RECIPES),
                       default='akiba2017',
                       help='whole recipe (default: akiba2017)')
    group.add_argument('--optimizer', choices=recipes.OPTIMIZERS,
                       help='update rule (akiba2017: rmsprop-warmup; '
                            'others: momentum-sgd)')
    _switch(group, 'momentum_correction',
            'momentum-sgd with lr outside the momentum buffer, so lr changes '
            'act at once (akiba2017, goyal2017: on; sgd: off = Chainer\'s '
            'MomentumSGD); rmsprop-warmup always has it')
    group.add_argument('--lr-schedule', choices=sorted(recipes.LR_SCHEDULES),
                       help='learning-rate schedule (akiba2017: slow-start; '
                            'goyal2017: goyal; sgd: constant; you2017: '
                            'poly)')
    group.add_argument('--lr', type=float,
                       help='base learning rate the schedule multiplies '
                            '(default: 0.1 x total minibatch / 256; with '
                            'LARS 2 x sqrt(total minibatch / 256))')
    group.add_argument('--momentum', type=float,
                       help='momentum mu1 (default: 0.9)')
    group.add_argument('--lr-rmsprop', type=float,
                       help='RMSprop step eta_RMSprop of the warm-up; '
                            'alpha_rmsprop = (1 - alpha_sgd) x lr-rmsprop / '
                            'lr (default: 3e-4)')
    group.add_argument('--mu2', type=float,
                       help='decay of the mean square of the gradient '
                            '(default: 0.99)')
    group.add_argument('--eps', type=float,
                       help='RMSprop denominator sqrt(m) + eps '
                            '(default: 1e-8)')
    group.add_argument('--warmup-center', type=float,
                       help='epoch at which alpha_sgd = 0.5 (default: 10)')
    group.add_argument('--warmup-period', type=float,
                       help='epochs over which alpha_sgd slides '
                            '(default: 5)')
    group.add_argument('--alpha-sgd-form',
                       choices=sorted(schedules.ALPHA_SGD_SLOPES),
                       help='linear branch of alpha_sgd: elu = 0.5 + '
                            '(e - c) / p, double-slope = 0.5 + 2 (e - c) / p '
                            '(default: elu)')
    _switch(group, 'scale_schedule',
            'lay all epoch boundaries (and the warm-up centre and period) '
            'out for --epoch instead of 90 epochs (default: off)')
    group.add_argument('--weight-decay', type=float,
                       help='L2 weight decay, 0 for none (default: 1e-4)')
    group.add_argument('--weight-decay-exempt',
                       choices=sorted(recipes.WEIGHT_DECAY_EXEMPT),
                       help='parameters not decayed: bn = normalization '
                            'gamma/beta, bn-bias = those and biases '
                            '(goyal2017: bn; you2017: bn-bias; others: '
                            'none)')
    _switch(group, 'lars',
            'layer-wise adaptive rate scaling of every array not exempt '
            '(you2017: on; others: off)')
    group.add_argument('--lars-eta', type=float,
                       help='LARS trust coefficient eta (default: 0.001)')
    group.add_argument('--warmup-epochs', type=float,
                       help='linear warm-up of the poly schedule, in epochs '
                            'of the 90-epoch layout (default: 5)')
    group.add_argument('--poly-power', type=float,
                       help='power of the poly decay (default: 2)')
    group.add_argument('--label-smoothing', type=float,
                       help='weight eps of the uniform target in the '
                            'training loss (you2017: 0.1; others: 0)')
    group.add_argument('--dtype', choices=recipes.DTYPES,
                       help='float32 (default), or mixed16: float16 '
                            'activations and gradients, float32 master '
                            'weights, dynamic loss scaling')
    group.add_argument('--loss-scale', type=float,
                       help='initial loss scale of mixed16, a power of two '
                            '(default: 1024)')
    group.add_argument('--loss-scale-interval', type=int,
                       help='clean updates after which the loss scale '
                            'doubles (default: 1000)')
    _switch(group, 'zero_init_residual',
            'start the last BN gamma of every residual block at 0 '
            '(goyal2017: on; others: off)')
    return group

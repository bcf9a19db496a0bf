"""Prints the model's predictions for a preset cluster, changed by flags.

    python -m studies.scaling_model [--preset mn1|h100] [--gpus N ...]
        [--sources] [--json] [--plot FILE.png [--force]] [--step-time S]
        [--allreduce-time S --allreduce-procs P]
"""
import argparse
import dataclasses
import json
import sys

from largebatch import outputs

from studies.scaling_model.hardware import (
    DTYPE_BYTES, IMAGENET_TRAIN_IMAGES, RING_ORDERS, UNITS, Workload)
from studies.scaling_model.model import calibrate_allreduce, predict
from studies.scaling_model.presets import (
    PAPER_GPUS, PAPER_ITERATION_SECONDS, PAPER_SECONDS, PRESETS)
from studies.scaling_model.report import (
    format_duration, format_sources, format_table, plot_scaling)

# Command-line overrides of the preset: flag, field, type, help; the flag
# takes the field's value in the unit of hardware.UNITS.
OVERRIDES = (
    ('--gpus-per-node', 'gpus_per_node', int, 'GPUs per node'),
    ('--images-per-s', 'images_per_s', float,
     'one GPU\'s training images/s'),
    ('--intra-gbytes-per-s', 'intra_bandwidth', float,
     'ring bandwidth inside a node, GB/s'),
    ('--intra-latency-us', 'intra_latency', float,
     'ring step latency inside a node, us'),
    ('--node-gbytes-per-s', 'node_bandwidth', float,
     'network bandwidth of one node, all links, GB/s'),
    ('--inter-latency-us', 'inter_latency', float,
     'ring step latency between nodes, us'),
    ('--nodes-per-group', 'nodes_per_group', int,
     'nodes under one leaf switch'),
    ('--oversubscription', 'oversubscription', float,
     'leaf down/up bandwidth ratio (1: full fat tree)'),
    ('--h2d-gbytes-per-s', 'host_to_device', float,
     'host-to-GPU copy bandwidth, GB/s'),
    ('--loader-images-per-s', 'loader_images_per_s', float,
     'one node\'s image decoding throughput'),
)


PROG = 'python -m studies.scaling_model'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='Predict time per iteration and time to train ResNet-50 '
                    'for N GPUs (see docs/scaling.md for the model).')
    parser.add_argument('--preset', choices=sorted(PRESETS), default='mn1',
                        help='cluster to start from (default: mn1, the '
                             'paper\'s)')
    parser.add_argument('--gpus', type=int, nargs='+',
                        default=[2 ** i for i in range(11)],
                        help='GPU counts to predict for (default 1 ... 1024)')
    parser.add_argument('--batchsize', type=int, default=32,
                        help='images per GPU per iteration')
    parser.add_argument('--epochs', type=float, default=90)
    parser.add_argument('--train-images', type=int,
                        default=IMAGENET_TRAIN_IMAGES)
    parser.add_argument('--crop-size', type=int, default=224)
    parser.add_argument('--allreduce-dtype', choices=sorted(DTYPE_BYTES),
                        default='float16',
                        help='dtype of the gradients on the wire')
    for flag, _, kind, text in OVERRIDES:
        parser.add_argument(flag, type=kind, help=text)
    parser.add_argument('--ring-order', choices=RING_ORDERS,
                        help='whether the inter-node ring follows the groups')
    parser.add_argument('--step-time', type=float,
                        help='measured seconds of one worker\'s iteration '
                             'without communication (replaces the modelled '
                             'compute, loading and copy)')
    parser.add_argument('--allreduce-time', type=float,
                        help='measured seconds of one gradient all-reduce '
                             '(e.g. from benchmarks/allreduce.py)')
    parser.add_argument('--allreduce-procs', type=int,
                        help='processes of the measured all-reduce')
    parser.add_argument('--allreduce-bytes', type=float,
                        help='bytes each process all-reduced in the '
                             'measurement (default: the gradient in '
                             '--allreduce-dtype)')
    parser.add_argument('--plot', help='write a PNG figure here')
    parser.add_argument('--force', action='store_true',
                        help='replace the --plot file if it exists')
    parser.add_argument('--json', action='store_true',
                        help='print the predictions as JSON')
    parser.add_argument('--sources', action='store_true',
                        help='print the parameters and their sources')
    args = parser.parse_args(argv)
    if (args.allreduce_time is None) != (args.allreduce_procs is None):
        parser.error('--allreduce-time and --allreduce-procs go together')
    if args.step_time is not None and not args.step_time > 0:
        parser.error('--step-time must be positive, got {}'.format(
            args.step_time))
    if any(g < 1 for g in args.gpus):
        parser.error('--gpus must be positive, got {}'.format(
            ' '.join(map(str, args.gpus))))
    try:
        args.workload = Workload(args.batchsize, args.epochs,
                                 args.train_images,
                                 allreduce_dtype=args.allreduce_dtype,
                                 crop_size=args.crop_size)
        args.cluster = build_cluster(args)
    except ValueError as e:
        parser.error(str(e))
    if args.plot:
        try:  # before the figures are computed
            outputs.refuse_existing(args.plot, args.force)
        except outputs.OutputError as e:
            fail(e)
    return args


def fail(error):
    """End with ``PROG: error: --plot MESSAGE``: the figure not written."""
    print('{}: error: --plot {}{}'.format(
        PROG, error, '; --force replaces it'
        if getattr(error, 'replaceable', False) else ''), file=sys.stderr)
    sys.exit(2)


def build_cluster(args):
    """The preset with the command line's overrides and measurements."""
    changes = {}
    for flag, field, _, _ in OVERRIDES:
        value = getattr(args, flag[2:].replace('-', '_'))
        if value is not None:
            changes[field] = value * UNITS[field][0]
    if args.ring_order is not None:
        changes['ring_order'] = args.ring_order
    if changes:
        changes['sources'] = dict(PRESETS[args.preset].sources, **{
            field: 'command line' for field in changes})
    cluster = dataclasses.replace(PRESETS[args.preset], **changes)
    if args.allreduce_time is not None:
        nbytes = (args.workload.gradient_bytes if args.allreduce_bytes is None
                  else args.allreduce_bytes)
        cluster = calibrate_allreduce(cluster, args.allreduce_time,
                                      args.allreduce_procs, nbytes)
    return cluster


def main(argv=None):
    args = parse_args(argv)
    cluster, workload = args.cluster, args.workload
    if args.sources:
        print(format_sources(cluster))
        return
    rows = predict(args.gpus, cluster, workload, args.step_time)
    if args.json:
        print(json.dumps([dict(r._asdict(), iteration=dict(
            r.iteration._asdict(), total=r.iteration.total)) for r in rows],
            indent=1))
    else:
        print(format_table(rows, cluster, workload))
    paper = (cluster == PRESETS['mn1'] and workload == Workload()
             and args.step_time is None)
    for r in rows:
        if paper and r.gpus == PAPER_GPUS and not args.json:
            print('\npaper at {} GPUs: {} ({} s per iteration); model: {} '
                  '({:.3f} s, {:+.1f}%)'.format(
                      PAPER_GPUS, format_duration(PAPER_SECONDS),
                      PAPER_ITERATION_SECONDS, format_duration(r.seconds),
                      r.iteration.total,
                      100 * (r.seconds / PAPER_SECONDS - 1)))
    if args.plot:
        title = '{}, {} images per GPU, {} all-reduce'.format(
            cluster.name, workload.batch_per_gpu, workload.allreduce_dtype)
        try:
            outputs.write_replacing(args.plot, lambda f: plot_scaling(
                rows, f, title, paper=paper), args.force)
        except outputs.OutputError as e:
            fail(e)
        except OSError as e:
            fail('{}: {}'.format(args.plot, e.strerror or e))
        print('wrote {}'.format(args.plot), file=sys.stderr)


if __name__ == '__main__':
    main()

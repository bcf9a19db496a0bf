#!/usr/bin/env python
"""Small-scale test of the paper's claim on real images (Fashion-MNIST).

Akiba et al. (2017) train with a minibatch of about 2.6% of the training set
per step (32,768 of 1.28M images, ~39 iterations per epoch) and claim that
RMSprop warm-up, the slow-start learning rate and final-batch BN keep the
accuracy of a small minibatch in the same number of epochs, where plain
linear scaling does not. This driver runs that comparison with the
project's own ``train_imagenet.py`` on a Fashion-MNIST subset:

- ``reference``: a small total minibatch, momentum SGD with step decay;
- at a total minibatch of ~2.6% of the subset: ``sgd`` (linear scaling, no
  warm-up), ``goyal2017``, ``akiba2017`` and ``akiba2017`` without each of
  its techniques, one at a time;

every one for the same number of epochs (``--scale-schedule`` lays the
90-epoch schedules out on it) and several seeds, one process with virtual
workers (``--accumulate``) of the same per-BN batch. Each run has its own
directory under ``--out``; finished runs are skipped and interrupted ones
resume from their newest snapshot, so the study can be restarted at will.
It ends by writing a results table, a plot of test accuracy against epochs
and a markdown page.

    python -m benchmarks.large_batch_study [--out DIR] [--jobs 2] [--quick]

The images come from Debian's ``dataset-fashion-mnist`` (``apt-get install
dataset-fashion-mnist``), read with ``datasets.make_demo``. Its results are
in docs/large_batch_study_subset.md; ``benchmarks.paper_regime_study`` asks
the same question in the paper's regime (docs/large_batch_study.md).
"""
import argparse
import collections
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import numpy

from benchmarks.trainer_runs import machine
from benchmarks.trainer_runs import mpi_command
from benchmarks.trainer_runs import read_log
from benchmarks.trainer_runs import REPO
from benchmarks.trainer_runs import validation_curve
from datasets import make_demo
from errors import DIVERGED_STATUS


class Plan(collections.namedtuple('Plan', [
        'train_per_class', 'val_per_class', 'bn_batch', 'small_total',
        'large_total', 'epochs', 'width', 'crop_size', 'seeds'])):
    """The size of a study.

    ``train_per_class`` x 10 training images, ``val_per_class`` x 10 test
    images (1000 is the whole 10k test set), ``bn_batch`` images per BN
    batch (per virtual worker), the totals of the reference and of the large
    minibatch, the epoch budget, the width multiplier of ResNet-50, the crop
    side and the number of seeds.
    """

    @property
    def n_train(self):
        return 10 * self.train_per_class

    def iterations_per_epoch(self, total):
        return self.n_train // total


#: The study: 10,240 training images, so that a total of 256 (8 virtual
#: workers of 32) is 2.5% of the set per step, 40 iterations per epoch.
FULL = Plan(train_per_class=1024, val_per_class=1000, bn_batch=32,
            small_total=32, large_total=256, epochs=4, width=0.125,
            crop_size=32, seeds=3)
#: A few iterations of every configuration on a tiny subset.
QUICK = Plan(train_per_class=4, val_per_class=2, bn_batch=4, small_total=4,
             large_total=20, epochs=1, width=0.125, crop_size=32, seeds=1)


class Config(collections.namedtuple('Config', [
        'name', 'label', 'large', 'main', 'flags'])):
    """One configuration: a ``large`` (or reference) minibatch, whether it
    is drawn in the accuracy plot (``main``), and its recipe flags."""


CONFIGS = [
    Config('reference', 'small minibatch, momentum SGD, step decay', False,
           True, ['--recipe', 'sgd', '--lr-schedule', 'goyal']),
    Config('sgd', 'linear scaling, no warm-up (sgd)', True, True,
           ['--recipe', 'sgd']),
    Config('goyal2017', 'Goyal et al. (goyal2017)', True, True,
           ['--recipe', 'goyal2017']),
    Config('akiba2017', 'Akiba et al. (akiba2017)', True, True,
           ['--recipe', 'akiba2017']),
    Config('no-rmsprop-warmup', 'akiba2017 without RMSprop warm-up', True,
           False, ['--recipe', 'akiba2017', '--optimizer', 'momentum-sgd']),
    Config('no-slow-start', 'akiba2017 without slow-start (Goyal steps)',
           True, False, ['--recipe', 'akiba2017', '--lr-schedule', 'goyal']),
    Config('no-final-batch-bn', 'akiba2017 with moving-average BN', True,
           False, ['--recipe', 'akiba2017', '--bn-stats', 'moving-average']),
    Config('no-fp16-allreduce', 'akiba2017 with a float32 all-reduce', True,
           False, ['--recipe', 'akiba2017', '--allreduce-dtype', 'float32']),
]


def prepare_data(root, idx_dir, plan):
    """Write the training subset and the test set as class-folder JPEGs
    under ``root/data`` (once); return the train and val directories."""
    data = os.path.join(root, 'data')
    train, val = os.path.join(data, 'train'), os.path.join(data, 'val')
    if os.path.isdir(train) and os.path.isdir(val):
        return train, val
    if not os.path.isdir(idx_dir):
        raise SystemExit(
            'large_batch_study: no Fashion-MNIST in {}; install it with '
            '`apt-get install dataset-fashion-mnist` or pass --idx-dir'
            .format(idx_dir))
    partial = data + '.partial'
    shutil.rmtree(partial, ignore_errors=True)
    for split, stem, per_class in (('train', 'train', plan.train_per_class),
                                   ('val', 't10k', plan.val_per_class)):
        make_demo.write_split(
            make_demo.read_idx(make_demo.find_idx(idx_dir,
                                                  stem + '-images-idx3')),
            make_demo.read_idx(make_demo.find_idx(idx_dir,
                                                  stem + '-labels-idx1')),
            per_class, os.path.join(partial, split))
    os.replace(partial, data)
    return train, val


def largest_divisor_at_most(n, bound):
    return max(d for d in range(1, max(1, bound) + 1) if n % d == 0)


def train_args(config, seed, plan, train, val, out):
    """The ``train_imagenet.py`` arguments of one run."""
    total = plan.large_total if config.large else plan.small_total
    per_epoch = plan.iterations_per_epoch(total)
    val_interval = 1 if config.main else plan.epochs
    return [train, val, '--out', out, '--resume', 'auto',
            '--seed', str(seed), '--width', str(plan.width),
            '--crop-size', str(plan.crop_size),
            '--batchsize', str(plan.bn_batch),
            '--accumulate', str(total // plan.bn_batch),
            '--epoch', str(plan.epochs), '--scale-schedule',
            '--loaderjob', '0', '--val_batchsize', '500',
            '--val-interval', str(val_interval), '--snapshot-interval', '1',
            '--keep-snapshots', '1',
            '--log-interval', str(largest_divisor_at_most(
                per_epoch, per_epoch // 4))] + config.flags


def run_one(config, seed, plan, train, val, root):
    """Train (or resume, or skip) one run; return its ``result.json``."""
    run_dir = os.path.join(root, '{}-seed{}'.format(config.name, seed))
    result_path = os.path.join(run_dir, 'result.json')
    if os.path.exists(result_path):
        with open(result_path) as f:
            return json.load(f)
    os.makedirs(run_dir, exist_ok=True)
    total = plan.large_total if config.large else plan.small_total
    args = train_args(config, seed, plan, train, val, run_dir)
    env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1',
               PYTHONPATH=REPO)
    start = time.time()
    with open(os.path.join(run_dir, 'train.out'), 'a') as out:
        out.write('$ {}\n'.format(' '.join(map(shlex.quote, args))))
        out.flush()
        status = subprocess.call(mpi_command(args), cwd=REPO, env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    wall = time.time() - start
    entries = read_log(run_dir)
    curve = validation_curve(entries, total, plan.n_train)
    final_epoch = plan.epochs
    if status == DIVERGED_STATUS:
        top1 = None
    elif status != 0:
        print('large_batch_study: {} exited {}; see {} (rerun to resume)'
              .format(run_dir, status, os.path.join(run_dir, 'train.out')),
              file=sys.stderr)
        return None
    elif not curve or abs(curve[-1][0] - final_epoch) > 1e-9:
        raise SystemExit('large_batch_study: {}: no validation at epoch {} '
                         'in its log'.format(run_dir, final_epoch))
    else:
        top1 = curve[-1][1]
    result = dict(config=config.name, seed=seed, total_minibatch=total,
                  top1=top1, diverged=status == DIVERGED_STATUS, curve=curve,
                  wall_s=wall, finished=time.time(),
                  # the trainer's own clock, which a resumed run continues
                  train_s=entries[-1]['elapsed_time'] if entries else wall)
    with open(result_path + '.tmp', 'w') as f:
        json.dump(result, f, indent=1)
    os.replace(result_path + '.tmp', result_path)
    print('{:>20} seed {}: {} ({:.0f} s)'.format(
        config.name, seed, 'diverged' if top1 is None
        else 'top-1 {:.4f}'.format(top1), wall), flush=True)
    return result


def check_plan(root, plan):
    """Store the plan in ``root/plan.json``; refuse another one there
    (more or fewer seeds are the same study)."""
    path = os.path.join(root, 'plan.json')
    if os.path.exists(path):
        with open(path) as f:
            stored = json.load(f)
        if dict(stored, seeds=plan.seeds) != plan._asdict():
            raise SystemExit('large_batch_study: --out {} holds a study '
                             'with another plan ({}); use another --out'
                             .format(root, stored))
    os.makedirs(root, exist_ok=True)
    with open(path, 'w') as f:
        json.dump(plan._asdict(), f, indent=1)


def run_study(root, plan, jobs, idx_dir, configs=CONFIGS):
    """All runs of ``configs``, seeds in the outer loop (so that an early
    stop leaves whole configurations), ``jobs`` at a time; their results."""
    check_plan(root, plan)
    train, val = prepare_data(root, idx_dir, plan)
    runs = [(config, seed) for seed in range(plan.seeds)
            for config in configs]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(run_one, config, seed, plan, train, val, root)
                   for config, seed in runs]
        return [f.result() for f in futures]


def load_results(root):
    results = []
    for config in CONFIGS:
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name, 'result.json')
            if name.startswith(config.name + '-seed') and os.path.exists(
                    path):
                with open(path) as f:
                    results.append(json.load(f))
    return results


def summarize(results):
    """Per configuration: top-1 values, their mean and sample std (None
    when fewer than two), the number of diverged runs."""
    rows = []
    for config in CONFIGS:
        mine = [r for r in results if r['config'] == config.name]
        top1 = [r['top1'] for r in mine if r['top1'] is not None]
        rows.append(dict(
            config=config, runs=len(mine), top1=top1,
            diverged=sum(r['diverged'] for r in mine),
            mean=float(numpy.mean(top1)) if top1 else None,
            std=float(numpy.std(top1, ddof=1)) if len(top1) > 1 else None,
            total=mine[0]['total_minibatch'] if mine else None))
    return rows


def plot_curves(results, path):
    """Test top-1 against epochs, mean over seeds with their range, for the
    main configurations."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for config in CONFIGS:
        curves = [r['curve'] for r in results
                  if r['config'] == config.name and not r['diverged']]
        if not config.main or not curves:
            continue
        n = min(len(c) for c in curves)
        epochs = [e for e, _ in curves[0][:n]]
        acc = numpy.array([[a for _, a in c[:n]] for c in curves]) * 100
        line, = ax.plot(epochs, acc.mean(axis=0), marker='o',
                        label='{} ({} seeds)'.format(config.name,
                                                     len(curves)))
        ax.fill_between(epochs, acc.min(axis=0), acc.max(axis=0),
                        color=line.get_color(), alpha=0.2)
    ax.set_xlabel('epoch')
    ax.set_ylabel('test top-1 (%)')
    ax.set_title('Fashion-MNIST, ResNet-50 (reduced), test accuracy')
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def fmt_percent(value):
    return '-' if value is None else '{:.2f}'.format(100 * value)


def results_table(rows, plan):
    lines = ['| configuration | total minibatch (% of set) | runs | '
             'diverged | top-1 % mean | std | per seed |',
             '|---|---|---|---|---|---|---|']
    for row in (row for row in rows if row['runs']):
        total = row['total']
        lines.append('| `{}`: {} | {} | {} | {} | {} | {} | {} |'.format(
            row['config'].name, row['config'].label,
            '-' if total is None else '{} ({:.2f}%)'.format(
                total, 100 * total / plan.n_train),
            row['runs'], row['diverged'], fmt_percent(row['mean']),
            fmt_percent(row['std']),
            ', '.join(fmt_percent(t) for t in row['top1'])))
    return '\n'.join(lines)


def write_report(plan, results, page, figure):
    """The results page: plan, table, plot, commands, machine, wall time."""
    rows = summarize(results)
    plot_curves(results, figure)
    walls = [max(r['wall_s'], r.get('train_s', 0)) for r in results]
    span = (max(r['finished'] for r in results) -
            min(r['finished'] - w for r, w in zip(results, walls))
            if results else 0)
    present = [row['config'] for row in rows if row['runs']]
    commands = ['python train_imagenet.py ' + ' '.join(train_args(
        config, '$SEED', plan, 'OUT/data/train', 'OUT/data/val',
        'OUT/{}-seed$SEED'.format(config.name))) for config in present]
    subset = ('' if len(present) == len(CONFIGS) else ' --configs ' +
              ' '.join(c.name for c in present))
    text = [
        '## Plan',
        '',
        '- training subset: {} Fashion-MNIST training images ({} per class); '
        'test set: {} images'.format(
            plan.n_train, plan.train_per_class, 10 * plan.val_per_class),
        '- ResNet-50 at width x{} ({} px crops), {} images per BN batch '
        '(one virtual worker)'.format(plan.width, plan.crop_size,
                                      plan.bn_batch),
        '- reference total minibatch {} ({} iterations per epoch); large '
        'total minibatch {} ({:.2f}% of the set, {} iterations per epoch)'
        .format(plan.small_total,
                plan.iterations_per_epoch(plan.small_total),
                plan.large_total, 100 * plan.large_total / plan.n_train,
                plan.iterations_per_epoch(plan.large_total)),
        '- {} epochs for every run, schedules scaled to them; {} seeds'
        .format(plan.epochs, plan.seeds),
        '',
        '## Final test top-1',
        '',
        results_table(rows, plan),
        '',
        '![test accuracy against epochs]({})'.format(
            os.path.relpath(figure, os.path.dirname(os.path.abspath(page)))),
        '',
        '## Commands',
        '',
        'The study: `python -m benchmarks.large_batch_study --out OUT '
        '--jobs 2 --epochs {} --seeds {}{}`. '.format(
            plan.epochs, plan.seeds, subset) +
        'Each run is one process (`mpiexec -n 1 -x OMP_NUM_THREADS=1`) with '
        'the flags below, `--seed` 0 to {}:'.format(plan.seeds - 1),
        '',
        '```',
        *commands,
        '```',
        '',
        '## Machine and wall time',
        '',
        '- {}'.format(machine()),
        '- {} runs, {:.0f} s of run time in all; {:.0f} s ({:.1f} min) from '
        'the first start to the last finish'.format(
            len(results), sum(walls), span, span / 60),
        '',
    ]
    with open(page, 'w') as f:
        f.write('\n'.join(text))
    return rows


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default=os.path.join(
        REPO, 'result', 'large_batch_study'), help='study root')
    parser.add_argument('--quick', action='store_true',
                        help='a few iterations of every configuration, one '
                             'seed, on a tiny subset')
    parser.add_argument('--jobs', type=int, default=2,
                        help='runs trained at the same time')
    parser.add_argument('--idx-dir', default=make_demo.IDX_DIR,
                        help='directory of the Fashion-MNIST IDX files')
    parser.add_argument('--page', help='results page to write (default: '
                                       'OUT/results.md)')
    parser.add_argument('--figure', help='accuracy plot to write (default: '
                                         'next to the page, .png)')
    parser.add_argument('--report-only', action='store_true',
                        help='write the page from the finished runs only')
    parser.add_argument('--epochs', type=int,
                        help='epoch budget of every run (default: {} for the '
                             'study, {} with --quick)'.format(
                                 FULL.epochs, QUICK.epochs))
    parser.add_argument('--seeds', type=int,
                        help='seeds per configuration (default: {}; 1 with '
                             '--quick)'.format(FULL.seeds))
    parser.add_argument('--configs', nargs='+',
                        choices=[c.name for c in CONFIGS],
                        default=[c.name for c in CONFIGS],
                        help='configurations to run (default: all)')
    args = parser.parse_args(argv)
    for flag in ('jobs', 'epochs', 'seeds'):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            parser.error('--{} must be positive, got {}'.format(flag, value))
    return args


def main(argv=None):
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.epochs:
        plan = plan._replace(epochs=args.epochs)
    if args.seeds:
        plan = plan._replace(seeds=args.seeds)
    page = args.page or os.path.join(args.out, 'results.md')
    figure = args.figure or os.path.splitext(page)[0] + '.png'
    if not args.report_only:
        run_study(args.out, plan, args.jobs, args.idx_dir,
                  [c for c in CONFIGS if c.name in args.configs])
    rows = write_report(plan, load_results(args.out), page, figure)
    for row in rows:
        print('{:>20}  {:>6} +- {:>5}  ({} runs, {} diverged)'.format(
            row['config'].name, fmt_percent(row['mean']),
            fmt_percent(row['std']), row['runs'], row['diverged']))
    print('wrote', page, 'and', figure)


if __name__ == '__main__':
    main()

#!/usr/bin/env python
"""The paper's regime at small scale: a minibatch 128x the reference's.

Akiba et al. (2017) train ResNet-50 with a total minibatch of 32,768, 128x
He et al.'s 256 (so lr 12.8 against 0.1 under linear scaling), about 39
updates per epoch, 2.6% of the data per step. This driver asks the same of
the project's ``train_imagenet.py`` on the whole Fashion-MNIST training set
(60,000 images; the 10,000 test images are the validation set):

- a learning-rate sweep of the reference (total minibatch ``b_ref``, one BN
  batch, He et al.'s step decay) picks ``lr_ref``, the best final top-1;
- at ``k x b_ref`` images per step (``k`` = 128: 1,536 = 2.56% of the set,
  39 updates per epoch), virtual workers of ``bn_batch`` images
  (``--accumulate``), every recipe at ``k x lr_ref`` (linear scaling):
  ``sgd``, ``goyal2017``, ``akiba2017``, ``you2017``, ``akiba2017``
  without each of its techniques, one at a time, and ``akiba2017`` with
  ``goyal2017``'s zero-init (and the reference with it, at ``b_ref``);
- the four recipes at smaller ``k`` (Goyal et al.'s Figure 1);

every run for the same epochs, the schedules laid out on them
(``--scale-schedule``), several seeds. Each run has its own directory under
``--out``; an interrupted run resumes from its newest snapshot. A finished
run's result and log are copied to ``--results`` (``docs/large_batch_study``)
with one row per run in its ``results.json``; a run whose result is there is
skipped, so the study continues in a later session or on another machine,
and the page (``docs/large_batch_study.md``) is regenerated from those files
after every run.

    python -m benchmarks.paper_regime_study [--jobs 2] [--quick]
    python -m benchmarks.paper_regime_study --report-only

The images come from Debian's ``dataset-fashion-mnist``, written as JPEGs by
``datasets.make_demo`` and decoded once into ``.npz`` files by
``datasets.in_memory``, which ``train_imagenet.py`` reads as train/val.
"""
import argparse
import collections
import concurrent.futures
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import numpy

from benchmarks.large_batch_study import machine
from benchmarks.large_batch_study import mpi_command
from benchmarks.large_batch_study import read_log
from datasets import in_memory
from datasets import make_demo
from datasets.transforms import resize_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINER = os.path.join(REPO, 'train_imagenet.py')
RESULTS = os.path.join(REPO, 'docs', 'large_batch_study')
PAGE = os.path.join(REPO, 'docs', 'large_batch_study.md')
DIVERGED = 3  # train_imagenet.py's exit status on a non-finite gradient
BEGIN, END = '<!-- BEGIN GENERATED -->', '<!-- END GENERATED -->'


class Plan(collections.namedtuple('Plan', [
        'train_per_class', 'val_per_class', 'b_ref', 'bn_batch', 'k',
        'sweep_ks', 'epochs', 'width', 'crop_size', 'seeds', 'sweep_seeds',
        'lrs', 'lr_epochs', 'plateau_epochs'])):
    """The size of a study.

    ``train_per_class`` x 10 training and ``val_per_class`` x 10 test
    images; the reference's total minibatch ``b_ref``; ``bn_batch`` images
    per BN batch (virtual worker) at ``k x b_ref`` and at every ``k`` of
    ``sweep_ks``; ``epochs`` for every run; ResNet-50's width multiplier and
    the crop side; seeds of the main runs and of the minibatch sweep; the
    reference's learning rates ``lrs``, each tried for ``lr_epochs``; the
    epochs of the plateau runs (:func:`plateau_runs`).
    """

    @property
    def n_train(self):
        return 10 * self.train_per_class


#: The study: B_ref 12, B = 128 x 12 = 1,536 (2.56% of 60,000, 39 updates
#: per epoch); see docs/large_batch_study.md for the time budget.
FULL = Plan(train_per_class=6000, val_per_class=1000, b_ref=12, bn_batch=32,
            k=128, sweep_ks=(8, 32), epochs=7, width=0.125, crop_size=32,
            seeds=3, sweep_seeds=2, lrs=(0.005, 0.01, 0.02, 0.04, 0.08),
            lr_epochs=2, plateau_epochs=21)
#: A few iterations of every run on a tiny subset.
QUICK = Plan(train_per_class=8, val_per_class=2, b_ref=2, bn_batch=4, k=4,
             sweep_ks=(2,), epochs=1, width=0.125, crop_size=32, seeds=1,
             sweep_seeds=1, lrs=(0.01, 0.02), lr_epochs=1, plateau_epochs=2)


class Config(collections.namedtuple('Config', [
        'name', 'label', 'flags', 'main', 'swept', 'at_b_ref'],
        defaults=(False,))):
    """A configuration: its recipe flags, whether its test accuracy is
    drawn against epochs (``main``), whether it runs at every ``k``
    (``swept``) and whether it runs at ``b_ref`` (``at_b_ref``, the
    references) instead of at ``k x b_ref``."""

    def k(self, plan):
        return 1 if self.at_b_ref else plan.k

    def flag(self, name):
        return self.flags[self.flags.index(name) + 1] \
            if name in self.flags else None


CONFIGS = [
    # He et al.'s reference tests with moving averages: the final batch of
    # a 12-image minibatch is too small a sample of the statistics.
    Config('reference', 'reference minibatch, momentum SGD, step decay',
           ['--recipe', 'sgd', '--lr-schedule', 'goyal', '--bn-stats',
            'moving-average'], True, False, True),
    Config('sgd', 'linear scaling, constant lr (sgd)', ['--recipe', 'sgd'],
           True, True),
    Config('goyal2017', 'Goyal et al. (goyal2017)',
           ['--recipe', 'goyal2017'], True, True),
    Config('akiba2017', 'Akiba et al. (akiba2017)',
           ['--recipe', 'akiba2017'], True, True),
    Config('you2017', 'LARS, poly(2), label smoothing (you2017)',
           ['--recipe', 'you2017'], True, True),
    Config('no-rmsprop-warmup', 'akiba2017 without RMSprop warm-up',
           ['--recipe', 'akiba2017', '--optimizer', 'momentum-sgd'], False,
           False),
    Config('no-slow-start', 'akiba2017 without slow-start (Goyal steps)',
           ['--recipe', 'akiba2017', '--lr-schedule', 'goyal'], False,
           False),
    Config('no-final-batch-bn', 'akiba2017 with moving-average BN',
           ['--recipe', 'akiba2017', '--bn-stats', 'moving-average'], False,
           False),
    Config('no-fp16-allreduce', 'akiba2017 with a float32 all-reduce',
           ['--recipe', 'akiba2017', '--allreduce-dtype', 'float32'], False,
           False),
]
CONFIG = {c.name: c for c in CONFIGS}


def with_zero_init(config, label):
    """``config`` with goyal2017's zero-init of each block's last BN gamma,
    neither drawn against epochs nor swept."""
    return Config(config.name + '-zero-init', label,
                  config.flags + ['--zero-init-residual'], False, False,
                  config.at_b_ref)


# Not one of the paper's techniques: zero-init added to akiba2017 tests how
# much of the gap between it and goyal2017 it explains; the reference with
# it is the baseline for the recipes that have it.
CONFIGS += [
    with_zero_init(CONFIG['akiba2017'], 'akiba2017 with zero-init '
                   '(goyal2017\'s)'),
    with_zero_init(CONFIG['reference'], 'reference with zero-init')]
CONFIG.update((c.name, c) for c in CONFIGS[-2:])


class Run(collections.namedtuple('Run', [
        'name', 'config', 'k', 'seed', 'lr', 'epochs', 'stage', 'curve'])):
    """One training run: ``k`` x ``b_ref`` images per step at base lr
    ``lr`` for ``epochs``; ``stage`` is 'lr-sweep' or 'study'; it validates
    every epoch with ``curve``, else at its end only."""

    def total(self, plan):
        return plan.b_ref * self.k


def sweep_runs(plan):
    return [Run('lrsweep-lr{:g}-seed0'.format(lr), CONFIG['reference'], 1,
                0, lr, plan.lr_epochs, 'lr-sweep', True) for lr in plan.lrs]


#: The configurations also trained for ``plateau_epochs``: the reference
#: and the three recipes, then the two with zero-init, which the recipes
#: that have it are compared against.
PLATEAU_CONFIGS = ('reference', 'goyal2017', 'akiba2017', 'you2017',
                   'reference-zero-init', 'akiba2017-zero-init')


def plateau_runs(plan, lr_ref):
    """Seed 0 of each of ``PLATEAU_CONFIGS`` at its ``k`` for
    ``plateau_epochs``, the schedules laid out on them: whether the study's
    epochs bring the reference to its plateau, and whether RQ1's answer
    holds there."""
    runs = []
    for config in (CONFIG[name] for name in PLATEAU_CONFIGS):
        k = config.k(plan)
        runs.append(Run(run_name(config, k, 0, 'plateau-'), config, k, 0,
                        lr_ref * k, plan.plateau_epochs, 'plateau', True))
    return runs


def study_runs(plan, lr_ref):
    """Every run of the study at the reference lr ``lr_ref``: seed by seed
    (so that an early stop leaves whole comparisons), the configurations at
    ``k`` first (seed 0's followed by the plateau runs), then the smaller
    ``k`` of the minibatch sweep."""
    def run(config, k, seed):
        return Run(run_name(config, k, seed), config, k, seed, lr_ref * k,
                   plan.epochs, 'study', config.main and k in (1, plan.k))
    runs = []
    for seed in range(plan.seeds):
        runs += [run(config, config.k(plan), seed) for config in CONFIGS]
        if seed == 0:
            runs += plateau_runs(plan, lr_ref)
        if seed < plan.sweep_seeds:
            runs += [run(config, k, seed) for k in plan.sweep_ks
                     for config in CONFIGS if config.swept]
    return runs


def run_name(config, k, seed, stage=''):
    if k == 1:
        return '{}-{}seed{}'.format(config.name, stage, seed)
    return '{}-k{}-{}seed{}'.format(config.name, k, stage, seed)


def peak_lr(run, plan):
    """The largest lr of any update of the run (slow-start: 0.5 x base)."""
    from optimizers import recipes
    recipe = recipes.resolve(run.config.flag('--recipe'), run.epochs,
                             lr=run.lr, scale_schedule=True,
                             lr_schedule=run.config.flag('--lr-schedule'))
    total = run.total(plan)
    lr = recipes.hyperparameter_schedules(recipe, total)['lr']
    updates = -(-run.epochs * plan.n_train // total)
    return max(lr(i * total / plan.n_train) for i in range(updates))


def prepare_data(root, idx_dir, plan):
    """The training subset and the test set as ``.npz`` of images decoded
    at the resized side, made once under ``root/data`` from JPEGs; return
    their paths."""
    data = os.path.join(root, 'data')
    paths = [os.path.join(data, split + '.npz') for split in ('train', 'val')]
    if all(os.path.exists(p) for p in paths):
        return paths
    if not os.path.isdir(idx_dir):
        raise SystemExit(
            'paper_regime_study: no Fashion-MNIST in {}; install it with '
            '`apt-get install dataset-fashion-mnist` or pass --idx-dir'
            .format(idx_dir))
    for (split, stem, per_class), path in zip(
            (('train', 'train', plan.train_per_class),
             ('val', 't10k', plan.val_per_class)), paths):
        folder = os.path.join(data, split)
        if not os.path.isdir(folder):
            shutil.rmtree(folder + '.partial', ignore_errors=True)
            make_demo.write_split(
                make_demo.read_idx(make_demo.find_idx(
                    idx_dir, stem + '-images-idx3')),
                make_demo.read_idx(make_demo.find_idx(
                    idx_dir, stem + '-labels-idx1')),
                per_class, folder + '.partial')
            os.replace(folder + '.partial', folder)
        in_memory.pack(folder, path, resize_for(plan.crop_size))
    return paths


def train_args(run, plan, train, val, out):
    """The ``train_imagenet.py`` arguments of one run."""
    total = run.total(plan)
    batch = min(plan.bn_batch, total)
    per_epoch = plan.n_train / total
    return [train, val, '--out', out, '--resume', 'auto',
            '--seed', str(run.seed), '--width', str(plan.width),
            '--crop-size', str(plan.crop_size), '--batchsize', str(batch),
            '--accumulate', str(total // batch), '--epoch', str(run.epochs),
            '--scale-schedule', '--loaderjob', '0', '--val_batchsize', '500',
            '--val-interval', str(1 if run.curve else run.epochs),
            '--snapshot-interval', '1', '--keep-snapshots', '1',
            '--log-interval', str(max(1, int(per_epoch // 2))),
            '--lr', '{:g}'.format(run.lr)] + run.config.flags


def validation_curve(entries, total, n_train):
    """``[(epoch, top-1), ...]`` from a run's log entries."""
    return [(entry['iteration'] * total / n_train,
             entry['validation/main/accuracy'])
            for entry in entries if 'validation/main/accuracy' in entry]


def source_of(trainer):
    """What trained: the SOURCE note of a frozen copy, else the commit."""
    folder = os.path.dirname(os.path.abspath(trainer))
    note = os.path.join(folder, 'SOURCE')
    if os.path.exists(note):
        with open(note) as f:
            return f.read().strip()
    head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'],
                          cwd=folder, capture_output=True, text=True)
    return 'git {} (working tree)'.format(head.stdout.strip() or '?')


def result_path(results, name):
    return os.path.join(results, 'runs', name + '.json')


def held(lock_path):
    """Whether another process holds the lock of a run directory."""
    if not os.path.exists(lock_path):
        return False
    with open(lock_path) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def run_one(run, plan, data, root, results, trainer):
    """Train (or resume, or skip) one run; return its result, or None when
    it failed or another driver holds it."""
    path = result_path(results, run.name)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    run_dir = os.path.join(root, 'runs', run.name)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, 'lock'), 'w') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        return _train(run, plan, data, run_dir, path, trainer)


def _train(run, plan, data, run_dir, path, trainer):
    total = run.total(plan)
    args = train_args(run, plan, *data, run_dir)
    env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1',
               PYTHONPATH=os.path.dirname(os.path.abspath(trainer)))
    start = time.time()
    with open(os.path.join(run_dir, 'train.out'), 'a') as out:
        out.write('$ {}\n'.format(' '.join(map(shlex.quote, args))))
        out.flush()
        status = subprocess.call(mpi_command(args, trainer), env=env,
                                 stdout=out, stderr=subprocess.STDOUT)
    wall = time.time() - start
    entries = read_log(run_dir)
    curve = validation_curve(entries, total, plan.n_train)
    if status not in (0, DIVERGED):
        print('paper_regime_study: {} exited {}; see {} (rerun to resume)'
              .format(run.name, status, os.path.join(run_dir, 'train.out')),
              file=sys.stderr, flush=True)
        return None
    if status == 0 and (not curve or not 0 <= curve[-1][0] - run.epochs <
                        total / plan.n_train + 1e-9):
        print('paper_regime_study: {}: no validation at epoch {} in its log'
              .format(run.name, run.epochs), file=sys.stderr, flush=True)
        return None
    result = dict(
        name=run.name, stage=run.stage, config=run.config.name, k=run.k,
        total_minibatch=total, share=total / plan.n_train, lr=run.lr,
        peak_lr=peak_lr(run, plan), seed=run.seed, epochs=run.epochs,
        top1=curve[-1][1] if status == 0 else None,
        diverged=status == DIVERGED, curve=curve, wall_s=wall,
        # the trainer's own clock, which a resumed run continues
        train_s=entries[-1]['elapsed_time'] if entries else wall,
        finished=time.time(), source=source_of(trainer))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if entries:  # none when it diverged before its first log line
        shutil.copyfile(os.path.join(run_dir, 'log'),
                        path[:-len('.json')] + '.log.json')
    _write_json(path, result)
    print('{:>28}: {} ({:.0f} s)'.format(
        run.name, 'diverged' if result['diverged']
        else 'top-1 {:.4f}'.format(result['top1']), wall), flush=True)
    return result


def _write_json(path, value):
    with open(path + '.tmp', 'w') as f:
        json.dump(value, f, indent=1)
    os.replace(path + '.tmp', path)


def load_results(results):
    folder = os.path.join(results, 'runs')
    if not os.path.isdir(folder):
        return []
    found = []
    for name in sorted(os.listdir(folder)):
        if name.endswith('.json') and not name.endswith('.log.json'):
            with open(os.path.join(folder, name)) as f:
                found.append(json.load(f))
    return found


def choose_lr(results, plan):
    """The swept lr with the best final top-1 (None before every swept lr
    has a result)."""
    swept = {r['lr']: r for r in results if r['stage'] == 'lr-sweep'}
    if any(lr not in swept for lr in plan.lrs):
        return None
    return max(plan.lrs, key=lambda lr: -1 if swept[lr]['diverged']
               else swept[lr]['top1'])


def check_plan(results, plan):
    """Keep the plan with the results; refuse another one (more or fewer
    seeds are the same study)."""
    path = os.path.join(results, 'plan.json')
    stored = None
    if os.path.exists(path):
        with open(path) as f:
            stored = json.load(f)
    mine = json.loads(json.dumps(plan._asdict()))
    ignore = dict(seeds=0, sweep_seeds=0)
    if stored is not None and dict(stored, **ignore) != dict(mine, **ignore):
        raise SystemExit('paper_regime_study: {} holds a study with another '
                         'plan ({}); use another --results'.format(
                             results, stored))
    os.makedirs(results, exist_ok=True)
    _write_json(path, mine)


def run_all(runs, plan, data, root, results, trainer, jobs, on_result):
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(run_one, run, plan, data, root, results,
                               trainer) for run in runs]
        done = []
        for future in concurrent.futures.as_completed(futures):
            done.append(future.result())
            on_result()
        return done


def run_study(plan, root, results, trainer, jobs, idx_dir, on_result,
              poll_s=60):
    """The lr sweep, then every run of the study at the chosen lr."""
    check_plan(results, plan)
    data = prepare_data(root, idx_dir, plan)
    run_all(sweep_runs(plan), plan, data, root, results, trainer, jobs,
            on_result)
    lr_ref = choose_lr(load_results(results), plan)
    while lr_ref is None:  # another process still trains a swept lr
        missing = [run.name for run in sweep_runs(plan)
                   if not os.path.exists(result_path(results, run.name))]
        if not any(held(os.path.join(root, 'runs', name, 'lock'))
                   for name in missing):
            raise SystemExit('paper_regime_study: the lr sweep did not '
                             'finish ({}); see their train.out and rerun'
                             .format(', '.join(missing)))
        time.sleep(poll_s)
        run_all(sweep_runs(plan), plan, data, root, results, trainer, jobs,
                on_result)
        lr_ref = choose_lr(load_results(results), plan)
    print('reference lr', lr_ref, flush=True)
    run_all(study_runs(plan, lr_ref), plan, data, root, results, trainer,
            jobs, on_result)


def write_rows(results):
    """``results.json``: the plan and one row per finished run."""
    keys = ('name', 'stage', 'config', 'k', 'total_minibatch', 'share', 'lr',
            'peak_lr', 'seed', 'epochs', 'top1', 'diverged', 'train_s',
            'source')
    rows = [{key: r[key] for key in keys} for r in load_results(results)]
    with open(os.path.join(results, 'plan.json')) as f:
        plan = json.load(f)
    _write_json(os.path.join(results, 'results.json'),
                dict(plan=plan, runs=rows))
    return rows


def summarize(results, stage='study'):
    """Per (configuration, k) of ``stage``: the top-1 of each seed, mean,
    sample std (None with fewer than two), diverged runs."""
    groups = collections.OrderedDict()
    order = {c.name: i for i, c in enumerate(CONFIGS)}
    for r in sorted(results, key=lambda r: (order[r['config']], r['k'],
                                            r['lr'], r['seed'])):
        if r['stage'] == stage:
            groups.setdefault((r['config'], r['k'], r['lr']), []).append(r)
    rows = []
    for (config, k, lr), mine in groups.items():
        top1 = [r['top1'] for r in mine if not r['diverged']]
        rows.append(dict(
            config=config, k=k, lr=lr, peak_lr=mine[0]['peak_lr'],
            total=mine[0]['total_minibatch'], share=mine[0]['share'],
            seeds=[r['seed'] for r in mine], top1=top1,
            diverged=sum(r['diverged'] for r in mine),
            mean=float(numpy.mean(top1)) if top1 else None,
            std=float(numpy.std(top1, ddof=1)) if len(top1) > 1 else None))
    return rows


def fmt_percent(value):
    return '-' if value is None else '{:.2f}'.format(100 * value)


def table(rows):
    if not rows:
        return '(no run finished yet)'
    lines = ['| configuration | k | total minibatch (% of set) | peak lr | '
             'runs | diverged | top-1 % mean | std | per seed |',
             '|---|---|---|---|---|---|---|---|---|']
    for row in rows:
        lines.append('| `{}` | {} | {} ({:.2f}%) | {:.4g} | {} | {} | {} | {}'
                     ' | {} |'.format(
                         row['config'], row['k'], row['total'],
                         100 * row['share'], row['peak_lr'],
                         len(row['seeds']), row['diverged'],
                         fmt_percent(row['mean']), fmt_percent(row['std']),
                         ', '.join(fmt_percent(t) for t in row['top1'])))
    return '\n'.join(lines)


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _save(plt, fig, ax, path, title, xlabel='epoch',
          ylabel='test top-1 (%)'):
    """Label, grid and legend ``ax``, write ``fig`` to ``path``, close it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_curves(results, k, path):
    """Test top-1 against epochs at ``k`` (and the reference): mean over
    seeds and their range."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for config in (c for c in CONFIGS if c.main):
        curves = [r['curve'] for r in results
                  if r['stage'] == 'study' and r['config'] == config.name
                  and r['k'] in (1, k) and not r['diverged']]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        epochs = [e for e, _ in curves[0][:n]]
        acc = numpy.array([[a for _, a in c[:n]] for c in curves]) * 100
        line, = ax.plot(epochs, acc.mean(axis=0), marker='o', markersize=3,
                        label='{} ({} seeds)'.format(config.name,
                                                     len(curves)))
        ax.fill_between(epochs, acc.min(axis=0), acc.max(axis=0),
                        color=line.get_color(), alpha=0.2)
    _save(plt, fig, ax, path, 'Fashion-MNIST, test top-1, k = {}'.format(k))


def plateau_pairs(results, plan):
    """``(config, k, study run, plateau run)`` of seed 0 for every plateau
    run that finished; the study run is None before it finished."""
    found = {(r['stage'], r['name']): r for r in results}
    pairs = []
    for run in plateau_runs(plan, 1.0):
        long = found.get(('plateau', run.name))
        if long is not None:
            pairs.append((run.config.name, run.k, found.get((
                'study', run_name(run.config, run.k, 0))), long))
    return pairs


def plot_plateau(pairs, plan, path):
    """Test top-1 against epochs of seed 0's run of the study (solid) and
    of the plateau run (dashed) of each configuration."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for config, _, short, long in pairs:
        color = None
        for r in (short, long):
            if r is None or not r['curve']:
                continue
            epochs, acc = zip(*r['curve'])
            line, = ax.plot(epochs, [100 * a for a in acc], marker='o',
                            markersize=2, color=color,
                            label='{}, {} epochs'.format(config, r['epochs']),
                            linestyle='--' if r is long else '-')
            color = line.get_color()
    _save(plt, fig, ax, path, 'Fashion-MNIST, {} and {} epochs, seed 0'.format(
        plan.epochs, plan.plateau_epochs))


def plot_sweep(rows, path):
    """Final top-1 against total minibatch, one line per swept recipe; the
    references as stars (hollow: with zero-init); diverged runs as crosses
    at the bottom."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for config in (c for c in CONFIGS if c.swept):
        mine = sorted((r for r in rows if r['config'] == config.name),
                      key=lambda r: r['total'])
        ok = [r for r in mine if r['mean'] is not None]
        if ok:
            line, = ax.plot([r['total'] for r in ok],
                            [100 * r['mean'] for r in ok], marker='o',
                            label=config.name)
            for r in ok:
                ax.plot([r['total']] * len(r['top1']),
                        [100 * t for t in r['top1']], '.',
                        color=line.get_color(), alpha=0.5)
        bad = [r for r in mine if r['diverged']]
        if bad:
            ax.plot([r['total'] for r in bad], [10] * len(bad), 'x',
                    color='k')
    for config in (c for c in CONFIGS if c.at_b_ref):
        ref = [r for r in rows if r['config'] == config.name and r['mean']]
        if ref:
            face = 'none' if '--zero-init-residual' in config.flags else 'k'
            ax.plot([ref[0]['total']], [100 * ref[0]['mean']], '*',
                    markersize=12, color='k', markerfacecolor=face,
                    label=config.name)
    ax.set_xscale('log', base=2)
    totals = sorted(set(r['total'] for r in rows))
    ax.set_xticks(totals)
    ax.set_xticklabels([str(t) for t in totals])
    ax.minorticks_off()
    _save(plt, fig, ax, path, 'Fashion-MNIST, same epochs for every run',
          xlabel='total minibatch (images per update)',
          ylabel='final test top-1 (%)')


def generated_text(plan, results, results_dir, page):
    """The generated part of the page: progress, tables, plots, commands,
    machine and wall time."""
    rel = os.path.relpath(results_dir, os.path.dirname(os.path.abspath(page)))
    lr_ref = choose_lr(results, plan)
    planned = len(sweep_runs(plan)) + len(study_runs(plan, 1.0))
    study = summarize(results)
    at_k = [r for r in study if r['k'] in (1, plan.k)]
    swept = [r for r in study
             if r['k'] == 1 or CONFIG[r['config']].swept]
    text = [
        '## Results',
        '',
        '{} of {} runs finished ({} diverged); the study continues where '
        'it stopped with the command below.'.format(
            len(results), planned, sum(r['diverged'] for r in results)),
        '',
        '### Learning-rate sweep of the reference ({} images per step, {} '
        'epochs, seed 0)'.format(plan.b_ref, plan.lr_epochs),
        '',
        table(summarize(results, 'lr-sweep')),
        '',
        'Chosen reference lr: {}.'.format(
            'not yet (sweep unfinished)' if lr_ref is None else
            '**{:g}**, so **{:g}** at k = {} (linear scaling)'.format(
                lr_ref, lr_ref * plan.k, plan.k)),
        '',
        '### At k = {}: {} images per step ({:.2f}% of the set), {} epochs'
        .format(plan.k, plan.b_ref * plan.k,
                100 * plan.b_ref * plan.k / plan.n_train, plan.epochs),
        '',
        table(at_k),
        '',
    ]
    if at_k:
        plot_curves(results, plan.k, os.path.join(results_dir, 'curves.png'))
        text += ['![test top-1 against epochs at k = {}]({}/curves.png)'
                 .format(plan.k, rel), '']
    pairs = plateau_pairs(results, plan)
    text += ['### {} epochs against {} (seed 0)'.format(
        plan.epochs, plan.plateau_epochs), '', '{} of {} plateau runs '
        'finished: {}, each schedule laid out on {} epochs.'.format(
            len(pairs), len(PLATEAU_CONFIGS), ', '.join(PLATEAU_CONFIGS),
            plan.plateau_epochs), '']
    if pairs:
        text += ['| configuration | k | top-1 % in {} epochs | in {} | '
                 'difference |'.format(plan.epochs, plan.plateau_epochs),
                 '|---|---|---|---|---|']
        for config, k, short, long in pairs:
            top1 = [None if r is None else r['top1'] for r in (short, long)]
            text.append('| `{}` | {} | {} | {} | {} |'.format(
                config, k, fmt_percent(top1[0]), fmt_percent(top1[1]),
                '-' if None in top1 else '{:+.2f}'.format(
                    100 * (top1[1] - top1[0]))))
        plot_plateau(pairs, plan, os.path.join(results_dir, 'plateau.png'))
        text += ['', '![test top-1 against epochs, {} and {} epochs]'
                 '({}/plateau.png)'.format(plan.epochs, plan.plateau_epochs,
                                           rel), '']
    text += ['### Final top-1 against the total minibatch', '',
             table(swept), '']
    if swept:
        plot_sweep(swept, os.path.join(results_dir, 'sweep.png'))
        text += ['![final top-1 against total minibatch]({}/sweep.png)'
                 .format(rel), '']
    examples = [sweep_runs(plan)[0]] + [
        run for run in (study_runs(plan, lr_ref) if lr_ref else [])
        if run.seed == 0 and (run.k in (1, plan.k) or run.config.name
                              == 'akiba2017')]
    walls = [r['train_s'] for r in results]
    span = (max(r['finished'] for r in results) -
            min(r['finished'] - r['wall_s'] for r in results)
            if results else 0)
    text += [
        '## Commands',
        '',
        '`python -m benchmarks.paper_regime_study --jobs 2` runs (or '
        'continues) the whole study and rewrites this section; each run is '
        '`mpiexec -n 1 -x OMP_NUM_THREADS=1 python train_imagenet.py` with '
        'the arguments below (seed 0 shown; the other swept lrs, seeds and '
        'k change only `--lr`, `--seed`, `--out`, `--accumulate` and '
        '`--log-interval`):',
        '',
        '```',
        *('python train_imagenet.py ' + ' '.join(train_args(
            run, plan, 'OUT/data/train.npz', 'OUT/data/val.npz',
            'OUT/runs/' + run.name)) for run in examples),
        '```',
        '',
        '## Machine and wall time',
        '',
        '- {}'.format(machine()),
        '- trained by: {}'.format('; '.join(sorted(
            set(r['source'] for r in results))) or '-'),
        '- {} runs, {:.1f} h of training time (the trainer\'s clock) in '
        'all; {:.1f} h from the first start to the last finish'.format(
            len(results), sum(walls) / 3600, span / 3600),
    ]
    return '\n'.join(text)


def write_page(plan, results_dir, page):
    """Regenerate the part of ``page`` between the markers (all of a new
    page) and ``results.json``."""
    write_rows(results_dir)
    results = load_results(results_dir)
    block = '{}\n{}\n{}'.format(
        BEGIN, generated_text(plan, results, results_dir, page), END)
    text = ''
    if os.path.exists(page):
        with open(page) as f:
            text = f.read()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text + '\n' + block + '\n'
    with open(page + '.tmp', 'w') as f:
        f.write(text)
    os.replace(page + '.tmp', page)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default=os.path.join(
        REPO, 'result', 'paper_regime_study'),
        help='run directories and data (default: result/paper_regime_study)')
    parser.add_argument('--results', default=RESULTS,
                        help='finished runs and results.json (default: '
                             'docs/large_batch_study)')
    parser.add_argument('--page', default=PAGE,
                        help='page to regenerate (default: '
                             'docs/large_batch_study.md)')
    parser.add_argument('--trainer', default=TRAINER,
                        help='train_imagenet.py to run (default: this '
                             'tree\'s); its folder is the PYTHONPATH')
    parser.add_argument('--quick', action='store_true',
                        help='a few iterations of every run, one seed, on a '
                             'tiny subset')
    parser.add_argument('--jobs', type=int, default=1,
                        help='runs trained at the same time (default 1)')
    parser.add_argument('--idx-dir', default=make_demo.IDX_DIR,
                        help='directory of the Fashion-MNIST IDX files')
    parser.add_argument('--report-only', action='store_true',
                        help='rewrite results.json and the page only')
    args = parser.parse_args(argv)
    if args.jobs <= 0:
        parser.error('--jobs must be positive, got {}'.format(args.jobs))
    if not os.path.isfile(args.trainer):
        parser.error('--trainer {}: no such file'.format(args.trainer))
    return args


def main(argv=None):
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.report_only:
        check_plan(args.results, plan)
        write_page(plan, args.results, args.page)
        return
    report = [sys.executable, '-m', 'benchmarks.paper_regime_study',
              '--report-only', '--results', args.results, '--page',
              args.page] + (['--quick'] if args.quick else [])

    def on_result():  # the page code as it is now, not as it was at start
        subprocess.call(report, cwd=REPO)
    run_study(plan, args.out, args.results, args.trainer, args.jobs,
              args.idx_dir, on_result)
    write_page(plan, args.results, args.page)
    print('wrote', args.page)


if __name__ == '__main__':
    main()

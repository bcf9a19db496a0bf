"""The study's regime: the plan (data, minibatches, epochs, seeds), the
configurations compared and the runs that train them, with their
``train_imagenet.py`` arguments."""
import collections
import math

from optimizers import schedules
from optimizers import recipes


class Plan(collections.namedtuple('Plan', [
        'train_per_class', 'val_per_class', 'b_ref', 'bn_batch', 'k',
        'sweep_ks', 'epochs', 'width', 'crop_size', 'seeds', 'sweep_seeds',
        'lrs', 'lr_epochs', 'plateau_epochs', 'paper_epochs',
        'paper_val_interval', 'paper_runs', 'paper_ablation_runs',
        'paper_fp16_runs'], defaults=((), ()))):
    """The size of a study.

    ``train_per_class`` x 10 training and ``val_per_class`` x 10 test
    images; the reference's total minibatch ``b_ref``; ``bn_batch`` images
    per BN batch (virtual worker) at ``k x b_ref`` and at every ``k`` of
    ``sweep_ks``; ``epochs`` for every run; ResNet-50's width multiplier and
    the crop side; seeds of the main runs and of the minibatch sweep; the
    reference's learning rates ``lrs``, each tried for ``lr_epochs``; the
    epochs of the plateau runs (:func:`plateau_runs`); the epochs of the
    runs on the paper's own schedule, their epochs between validations and
    their ``(configuration, seed)`` in the order they train
    (:func:`paper_schedule_runs`); RQ2's runs on that schedule, the
    ablations and the fp16 pair (:func:`paper_rq2_runs`).
    """

    @property
    def n_train(self):
        return 10 * self.train_per_class


#: The runs on the paper's own schedule, ``(configuration, seed)`` in the
#: order they train: each recipe's seed 0 and the two references it is
#: read against (the reference with zero-init, the longest run, before the
#: short ones left, so that two workers end together), then more seeds of
#: akiba2017 (a seed of the reference, 450,000 updates, takes as long as two
#: to four of them).
PAPER_SCHEDULE_RUNS = (('akiba2017', 0), ('reference', 0),
                       ('akiba2017-zero-init', 0), ('goyal2017', 0),
                       ('reference-zero-init', 0), ('you2017', 0),
                       ('akiba2017', 1), ('akiba2017', 2), ('reference', 1))

#: RQ2 on the paper's schedule: each of akiba2017's techniques removed, and
#: plain linear scaling, read against akiba2017's seeds of
#: ``PAPER_SCHEDULE_RUNS`` (the same trainer).
PAPER_ABLATION_RUNS = (('no-rmsprop-warmup', 0), ('no-slow-start', 0),
                       ('no-final-batch-bn', 0), ('sgd', 0))

#: RQ2's fp16 pair on the paper's schedule, trained as the fp16 rerun is
#: (every virtual worker's gradient rounded): akiba2017 with the float16
#: all-reduce and without it.
PAPER_FP16_RUNS = (('akiba2017', 0), ('no-fp16-allreduce', 0))


#: The study: B_ref 12, B = 128 x 12 = 1,536 (2.56% of 60,000, 39 updates
#: per epoch); see docs/large_batch_study.md for the time budget.
FULL = Plan(train_per_class=6000, val_per_class=1000, b_ref=12, bn_batch=32,
            k=128, sweep_ks=(8, 32), epochs=7, width=0.125, crop_size=32,
            seeds=3, sweep_seeds=2, lrs=(0.005, 0.01, 0.02, 0.04, 0.08),
            lr_epochs=2, plateau_epochs=21, paper_epochs=90,
            paper_val_interval=2, paper_runs=PAPER_SCHEDULE_RUNS,
            paper_ablation_runs=PAPER_ABLATION_RUNS,
            paper_fp16_runs=PAPER_FP16_RUNS)
#: A few iterations of every run on a tiny subset.
QUICK = Plan(train_per_class=8, val_per_class=2, b_ref=2, bn_batch=4, k=4,
             sweep_ks=(2,), epochs=1, width=0.125, crop_size=32, seeds=1,
             sweep_seeds=1, lrs=(0.01, 0.02), lr_epochs=1, plateau_epochs=2,
             paper_epochs=3, paper_val_interval=1,
             paper_runs=(('akiba2017', 0), ('reference', 0)),
             paper_ablation_runs=(('no-slow-start', 0),),
             paper_fp16_runs=PAPER_FP16_RUNS)


class Config(collections.namedtuple('Config', [
        'name', 'label', 'flags', 'main', 'swept', 'at_b_ref', 'ablates'],
        defaults=(False, None))):
    """A configuration: its recipe flags, whether its test accuracy is
    drawn against epochs (``main``), whether it runs at every ``k``
    (``swept``), whether it runs at ``b_ref`` (``at_b_ref``, the
    references) instead of at ``k x b_ref``, and the configuration it
    removes one technique from (``ablates``, RQ2's runs)."""

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
           False, ablates='akiba2017'),
    Config('no-slow-start', 'akiba2017 without slow-start (Goyal steps)',
           ['--recipe', 'akiba2017', '--lr-schedule', 'goyal'], False,
           False, ablates='akiba2017'),
    Config('no-final-batch-bn', 'akiba2017 with moving-average BN',
           ['--recipe', 'akiba2017', '--bn-stats', 'moving-average'], False,
           False, ablates='akiba2017'),
    Config('no-fp16-allreduce', 'akiba2017 with a float32 all-reduce',
           ['--recipe', 'akiba2017', '--allreduce-dtype', 'float32'], False,
           False, ablates='akiba2017'),
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

# Not in CONFIGS (the study's runs): the fp16 ablation again, on
# akiba2017-zero-init, whose seeds spread less than akiba2017's, with a
# float16 all-reduce that scales each parameter and rounds every virtual
# worker's gradient; see fp16_rerun_runs.
CONFIG['akiba2017-zero-init-fp32-allreduce'] = Config(
    'akiba2017-zero-init-fp32-allreduce',
    'akiba2017 with zero-init and a float32 all-reduce',
    CONFIG['akiba2017-zero-init'].flags + ['--allreduce-dtype', 'float32'],
    False, False, ablates='akiba2017-zero-init')


def baseline(config):
    """The reference ``config`` is read against: the one with the same
    zero-init choice (its flag or its recipe's), which alone moves top-1 by
    points at this size; None for the references themselves."""
    if config.at_b_ref:
        return None
    zero_init = ('--zero-init-residual' in config.flags or recipes.resolve(
        config.flag('--recipe')).zero_init_residual)
    return CONFIG['reference-zero-init' if zero_init else 'reference']


def ablated(config):
    """The configuration ``config`` removes a technique from, or None."""
    return None if config.ablates is None else CONFIG[config.ablates]


#: The stages, roughly in the order they train (the plateau runs follow
#: the study's seed 0); the first three lay every schedule out on the
#: run's epochs (the compressed study).
STAGES = ('lr-sweep', 'study', 'plateau', 'fp16-rerun', 'handover',
          'paper-schedule', 'paper-ablation', 'paper-fp16')
COMPRESSED_STAGES = STAGES[:3]


class Run(collections.namedtuple('Run', [
        'name', 'config', 'k', 'seed', 'lr', 'epochs', 'stage',
        'val_interval', 'scaled', 'iterations'], defaults=(True, None))):
    """One training run: ``k`` x ``b_ref`` images per step at base lr
    ``lr`` for ``epochs``, validating every ``val_interval`` epochs;
    ``stage`` is one of ``STAGES``. ``scaled`` lays the schedules out on
    ``epochs`` (``--scale-schedule``) instead of the paper's 90; a run with
    ``iterations`` stops after them and logs every update."""

    def total(self, plan):
        return plan.b_ref * self.k


def sweep_runs(plan):
    return [Run('lrsweep-lr{:g}-seed0'.format(lr), CONFIG['reference'], 1,
                0, lr, plan.lr_epochs, 'lr-sweep', 1) for lr in plan.lrs]


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
                        lr_ref * k, plan.plateau_epochs, 'plateau', 1))
    return runs


def study_runs(plan, lr_ref):
    """Every run of the study at the reference lr ``lr_ref``: seed by seed
    (so that an early stop leaves whole comparisons), the configurations at
    ``k`` first (seed 0's followed by the plateau runs), then the smaller
    ``k`` of the minibatch sweep."""
    def run(config, k, seed):
        curve = config.main and k in (1, plan.k)
        return Run(run_name(config, k, seed), config, k, seed, lr_ref * k,
                   plan.epochs, 'study', 1 if curve else plan.epochs)
    runs = []
    for seed in range(plan.seeds):
        runs += [run(config, config.k(plan), seed) for config in CONFIGS]
        if seed == 0:
            runs += plateau_runs(plan, lr_ref)
        if seed < plan.sweep_seeds:
            runs += [run(config, k, seed) for k in plan.sweep_ks
                     for config in CONFIGS if config.swept]
    return runs


#: The pair of the fp16 rerun: akiba2017-zero-init with the float16
#: all-reduce, and without it.
FP16_RERUN_CONFIGS = ('akiba2017-zero-init',
                      'akiba2017-zero-init-fp32-allreduce')


def fp16_rerun_runs(plan, lr_ref):
    """RQ2's fp16 pair again, seed by seed at ``k`` for ``epochs``, with
    each of the ``k`` x ``b_ref`` / ``bn_batch`` virtual workers' gradients
    scaled per parameter and rounded to float16 as a real worker's would
    be (``--virtual-worker-rounding on``); the study's own pair rounded
    one process's sum once per update."""
    runs = []
    for seed in range(plan.seeds):
        for config in (CONFIG[name] for name in FP16_RERUN_CONFIGS):
            runs.append(Run(run_name(config, plan.k, seed, 'fp16rerun-'),
                            config, plan.k, seed, lr_ref * plan.k,
                            plan.epochs, 'fp16-rerun', 1))
    return runs


def paper_schedule_runs(plan, lr_ref, pairs=None, stage='paper-schedule',
                        tag=''):
    """The plan's ``paper_runs`` (or ``pairs``) for ``paper_epochs`` with
    the paper's epochs unscaled: the RMSprop-to-SGD slide (epochs 10 to
    12.5) lasts about 98 updates at k = 128, not 7.6 as in the study's 7
    epochs."""
    runs = []
    for name, seed in plan.paper_runs if pairs is None else pairs:
        config = CONFIG[name]
        k = config.k(plan)
        runs.append(Run(run_name(config, k, seed, 'paper{}{}-'.format(
            plan.paper_epochs, tag)), config, k, seed, lr_ref * k,
            plan.paper_epochs, stage, plan.paper_val_interval,
            scaled=False))
    return runs


def paper_rq2_runs(plan, lr_ref):
    """RQ2 on the paper's schedule: the ablations (stage
    ``paper-ablation``, trained as ``paper_runs`` are), then the fp16 pair
    (stage ``paper-fp16``, ``NAME-k128-paper90fp16-seedS``, trained as the
    fp16 rerun is)."""
    return (paper_schedule_runs(plan, lr_ref, plan.paper_ablation_runs,
                                'paper-ablation') +
            paper_schedule_runs(plan, lr_ref, plan.paper_fp16_runs,
                                'paper-fp16', 'fp16'))


#: Where the handover runs stop, in the paper's epochs: 2.5 past the end of
#: the RMSprop-to-SGD slide (epochs 10 to 12.5 of 90).
HANDOVER_UNTIL = 15.0


def handover_runs(plan, lr_ref, seed=2):
    """akiba2017 at ``k`` for the study's, the plateau runs' and the paper's
    epochs, each stopped at ``HANDOVER_UNTIL`` (laid out on its epochs) and
    logging the training loss of every update: whether the loss spike at
    the handover depends on how many updates the slide lasts. Seed 2 had
    the worst spike at 7 epochs."""
    config = CONFIG['akiba2017']
    runs = []
    for epochs in (plan.epochs, plan.plateau_epochs, plan.paper_epochs):
        per_epoch = plan.n_train / (plan.b_ref * plan.k)
        until = HANDOVER_UNTIL * epochs / schedules.REFERENCE_EPOCHS
        runs.append(Run(
            run_name(config, plan.k, seed, 'handover{}-'.format(epochs)),
            config, plan.k, seed, lr_ref * plan.k, epochs, 'handover',
            epochs, scaled=epochs != plan.paper_epochs,
            iterations=max(1, int(math.ceil(until * per_epoch)))))
    return runs


def paper_stage_runs(plan, lr_ref):
    """The runs after the study, in the order they train: the two short
    handover runs, akiba2017's first run on the paper's schedule, the
    handover run on it, then the other runs on the paper's schedule."""
    handover = handover_runs(plan, lr_ref)
    paper = paper_schedule_runs(plan, lr_ref)
    return handover[:2] + paper[:1] + handover[2:] + paper[1:]


def run_name(config, k, seed, stage=''):
    if k == 1:
        return '{}-{}seed{}'.format(config.name, stage, seed)
    return '{}-k{}-{}seed{}'.format(config.name, k, stage, seed)


def peak_lr(run, plan):
    """The largest lr of any update of the run (slow-start: 0.5 x base)."""
    recipe = recipes.resolve(run.config.flag('--recipe'), run.epochs,
                             lr=run.lr, scale_schedule=run.scaled,
                             lr_schedule=run.config.flag('--lr-schedule'))
    total = run.total(plan)
    lr = recipes.hyperparameter_schedules(recipe, total)['lr']
    updates = run.iterations or -(-run.epochs * plan.n_train // total)
    return max(lr(i * total / plan.n_train) for i in range(updates))


def train_args(run, plan, train, val, out):
    """The ``train_imagenet.py`` arguments of one run."""
    total = run.total(plan)
    batch = min(plan.bn_batch, total)
    per_epoch = plan.n_train / total
    return [train, val, '--out', out, '--resume', 'auto',
            '--seed', str(run.seed), '--width', str(plan.width),
            '--crop-size', str(plan.crop_size), '--batchsize', str(batch),
            '--accumulate', str(total // batch),
            '--epoch', str(run.epochs)] + (
        ['--scale-schedule'] if run.scaled else []) + (
        ['--iterations', str(run.iterations)] if run.iterations else []) + [
            '--loaderjob', '0', '--val_batchsize', '500',
            '--val-interval', str(run.val_interval),
            '--snapshot-interval', '1', '--keep-snapshots', '1',
            '--log-interval', str(1 if run.iterations
                                  else max(1, int(per_epoch // 2))),
            '--lr', '{:g}'.format(run.lr)] + run.config.flags

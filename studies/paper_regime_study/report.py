"""The study's report: ``results.json`` (one row per finished run) and
the generated part of the page (tables, plots, commands, machine and wall
time), rewritten after every run."""
import collections
import os

import numpy

from largebatch import outputs
from studies.paper_regime_study.plots import handover_position
from studies.paper_regime_study.plots import plot_curves
from studies.paper_regime_study.plots import plot_handover
from studies.paper_regime_study.plots import plot_paper_curves
from studies.paper_regime_study.plots import plot_plateau
from studies.paper_regime_study.plots import plot_sweep
from studies.paper_regime_study.regime import ablated
from studies.paper_regime_study.regime import baseline
from studies.paper_regime_study.regime import CONFIG
from studies.paper_regime_study.regime import COMPRESSED_STAGES
from studies.paper_regime_study.regime import fp16_rerun_runs
from studies.paper_regime_study.regime import handover_runs
from studies.paper_regime_study.regime import paper_schedule_runs
from studies.paper_regime_study.regime import PLATEAU_CONFIGS
from studies.paper_regime_study.regime import plateau_runs
from studies.paper_regime_study.regime import run_name
from studies.paper_regime_study.regime import study_runs
from studies.paper_regime_study.regime import sweep_runs
from studies.paper_regime_study.regime import train_args
from studies.paper_regime_study.runner import choose_lr
from studies.paper_regime_study.runner import load_results
from studies.paper_regime_study.runner import read_json
from studies.paper_regime_study.runner import write_json

BEGIN, END = '<!-- BEGIN GENERATED -->', '<!-- END GENERATED -->'


def write_rows(results):
    """``results.json``: the plan and one row per finished run."""
    keys = ('name', 'stage', 'config', 'k', 'total_minibatch', 'share', 'lr',
            'peak_lr', 'seed', 'epochs', 'top1', 'diverged', 'train_s',
            'source')
    recorded = ('machine', 'blas_kernels')  # by the runs that record them
    rows = [dict({key: r[key] for key in keys},
                 **{key: r[key] for key in recorded if key in r})
            for r in load_results(results)]
    plan = read_json(os.path.join(results, 'plan.json'),
                     'move it away or use another --results')
    write_json(os.path.join(results, 'results.json'),
               dict(plan=plan, runs=rows))
    return rows


def summarize(results, stage='study'):
    """Per (configuration, k) of ``stage``: the top-1 of each seed, mean,
    sample std (None with fewer than two), diverged runs."""
    groups = collections.OrderedDict()
    order = {name: i for i, name in enumerate(CONFIG)}
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


def gaps(results, against, stage='study'):
    """Per configuration and k of ``stage`` that ``against`` pairs with a
    configuration: its top-1 minus that of ``against(config)`` of the same
    seed (at b_ref for a reference, else at the same k), None where either
    diverged; mean and sample std of those that did not."""
    top1 = {(r['config'], r['k'], r['seed']): None if r['diverged']
            else r['top1'] for r in results if r['stage'] == stage}
    order = list(CONFIG)
    keys = sorted({(c, k) for c, k, _ in top1
                   if against(CONFIG[c]) is not None},
                  key=lambda key: (order.index(key[0]), -key[1]))
    rows = []
    for name, k in keys:
        base = against(CONFIG[name])
        base_k = 1 if base.at_b_ref else k
        seeds = sorted(s for c, kk, s in top1
                       if (c, kk) == (name, k) and (base.name, base_k, s)
                       in top1)
        pairs = [(top1[name, k, s], top1[base.name, base_k, s])
                 for s in seeds]
        diffs = [None if None in pair else pair[0] - pair[1]
                 for pair in pairs]
        ok = [d for d in diffs if d is not None]
        if seeds:
            rows.append(dict(
                config=name, k=k, baseline=base.name, seeds=seeds,
                gaps=diffs, mean=float(numpy.mean(ok)) if ok else None,
                std=float(numpy.std(ok, ddof=1)) if len(ok) > 1 else None))
    return rows


def gap_table(rows):
    if not rows:
        return '(no pair of a run and its reference finished yet)'
    points = '{:+.2f}'.format
    lines = ['| configuration | k | against | seeds | gap (points) mean | '
             'std | per seed |', '|---|---|---|---|---|---|---|']
    for row in rows:
        lines.append('| `{}` | {} | `{}` | {} | {} | {} | {} |'.format(
            row['config'], row['k'], row['baseline'], len(row['seeds']),
            '-' if row['mean'] is None else points(100 * row['mean']),
            fmt_percent(row['std']), ', '.join(
                'diverged' if g is None else points(100 * g)
                for g in row['gaps'])))
    return '\n'.join(lines)


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


def generated_text(plan, results, results_dir, page):
    """The generated part of the page: progress, tables, plots, commands,
    machine and wall time."""
    rel = os.path.relpath(results_dir, os.path.dirname(os.path.abspath(page)))
    lr_ref = choose_lr(results, plan)
    planned = len(sweep_runs(plan)) + len(study_runs(plan, 1.0))
    compressed = [r for r in results if r['stage'] in COMPRESSED_STAGES]
    study = summarize(results)
    at_k = [r for r in study if r['k'] in (1, plan.k)]
    swept = [r for r in study
             if r['k'] == 1 or CONFIG[r['config']].swept]
    text = [
        '## Results',
        '',
        '{} of {} runs finished ({} diverged); {}.'.format(
            len(compressed), planned,
            sum(r['diverged'] for r in compressed),
            'the study is complete; the command below reruns any run whose '
            'result is removed' if len(compressed) >= planned else
            'the study continues where it stopped with the command below'),
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
    text += ['### Gap to the reference, seed by seed', '',
             'Top-1 of each run minus that of the reference with the same '
             'zero-init choice and the same seed, in points (RQ1\'s '
             'measure; the paper: 74.9% at 32k against 75.3% at 256, '
             '-0.4). k = {} are the minibatch sweep.'.format(
                 ' and '.join(map(str, plan.sweep_ks))), '',
             gap_table(gaps(results, baseline)), '',
             '### Without each technique, seed by seed', '',
             'Top-1 of each run without one of a recipe\'s techniques minus '
             'that of the whole recipe of the same seed, in points (RQ2\'s '
             'measure).', '', gap_table(gaps(results, ablated)), '']
    text += fp16_rerun_text(plan, results)
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
    text += paper_schedule_text(plan, results, results_dir, rel, lr_ref)
    text += paper_rq2_text(plan, results)
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
        '`python -m studies.paper_regime_study --jobs 2` runs (or '
        'continues) the whole study and rewrites this section; each run is '
        '`mpiexec -n 1 -x OMP_NUM_THREADS=1 python train_imagenet.py` with '
        '`OPENBLAS_CORETYPE=Haswell` where the CPU has AVX2 and '
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
        *machines_text(results),
        '- trained by: {}'.format('; '.join(sorted(
            set(r['source'] for r in results))) or '-'),
        '- {} runs, {:.1f} h of training time (the trainer\'s clock) in '
        'all; {:.1f} h from the first start to the last finish'.format(
            len(results), sum(walls) / 3600, span / 3600),
    ]
    return '\n'.join(text)


def machines_text(results):
    """The machines recorded in ``results`` (each run's last start), with
    the OpenBLAS kernels it ran; the count of runs without a record."""
    machines = sorted(set(
        '{}, OpenBLAS kernels: {}'.format(
            r['machine'], r['blas_kernels'] or "the CPU's own")
        for r in results if 'machine' in r))
    unrecorded = sum('machine' not in r for r in results)
    return ['- trained on: {}'.format(machine) for machine in machines] + (
        ['- not recorded (see the Reading): {} runs, finished before runs '
         'recorded their machine'.format(unrecorded)] if unrecorded else [])


def fp16_rerun_text(plan, results):
    """The section on RQ2's fp16 pair trained again with every virtual
    worker's gradient scaled and rounded as a real worker's."""
    rerun = [r for r in results if r['stage'] == 'fp16-rerun']
    workers = plan.b_ref * plan.k // plan.bn_batch
    return [
        '### The fp16 all-reduce again, every virtual worker rounded', '',
        '{} of {} runs finished. `akiba2017-zero-init` with the float16 '
        'all-reduce against the same with a float32 one, {} epochs at k = '
        '{}, seed by seed. Each of the {} virtual workers\' gradients is '
        'scaled per parameter and rounded to float16 as one of {} real '
        'workers\' would be (`--virtual-worker-rounding on`, the '
        'default); the study\'s pair above rounded one process\'s sum '
        'once per update. Trained by the trainer named under "Machine and '
        'wall time".'.format(len(rerun), len(fp16_rerun_runs(plan, 1.0)),
                             plan.epochs, plan.k, workers, workers), '',
        table(summarize(results, 'fp16-rerun')), '',
        'The float32 all-reduce minus the float16 one, same seed, in '
        'points:', '',
        gap_table(gaps(results, ablated, 'fp16-rerun')), '']


def paper_schedule_text(plan, results, results_dir, rel, lr_ref):
    """The section on the runs with the paper's epochs unscaled: progress,
    top-1 per seed and gap to the reference, the curves, the handover
    figure and the commands."""
    paper = [r for r in results if r['stage'] == 'paper-schedule']
    handover = [r for r in results if r['stage'] == 'handover']
    planned = paper_schedule_runs(plan, 1.0)
    planned_handover = handover_runs(plan, 1.0)
    text = [
        '## The paper\'s {}-epoch schedule'.format(plan.paper_epochs), '',
        '{} of {} runs on the paper\'s schedule and {} of {} handover runs '
        'finished ({} diverged). Every schedule keeps the paper\'s epochs '
        '(no `--scale-schedule`): the RMSprop warm-up slides to SGD over '
        'epochs 10 to 12.5, about {:.0f} updates at k = {}; slow-start steps '
        'at 40, 70 and 85; Goyal\'s warm-up over 5 epochs and steps at 30, '
        '60 and 80; poly(2) for `you2017`; the reference\'s steps at 30, 60 '
        'and 80. Tested every {} epochs.'.format(
            len(paper), len(planned), len(handover),
            len(planned_handover),
            sum(r['diverged'] for r in paper + handover),
            2.5 * plan.n_train / (plan.b_ref * plan.k), plan.k,
            plan.paper_val_interval), '',
        table(summarize(results, 'paper-schedule')), '',
        'Gap to the reference with the same zero-init choice and seed, in '
        'points ({} epochs):'.format(plan.paper_epochs), '',
        gap_table(gaps(results, baseline, 'paper-schedule')), '']
    if paper:
        plot_paper_curves(results, os.path.join(results_dir,
                                                'paper_curves.png'))
        text += ['![test top-1 against epochs, the paper\'s schedule]'
                 '({}/paper_curves.png)'.format(rel), '']
    if handover:
        plot_handover(handover, plan.n_train,
                      os.path.join(results_dir, 'handover.png'))
        text += [
            '### The handover', '',
            '`akiba2017`, seed 2, with the schedule laid out on {} '
            'epochs (as in the study, the plateau runs and the paper), each '
            'run stopped at the paper\'s epoch {:g} and logging the training '
            'loss of every update (the shaded band is the slide, where '
            'alpha_SGD rises from 0.5 to 1):'.format(
                ', '.join(str(r['epochs']) for r in sorted(
                    handover, key=lambda r: r['epochs'])), 15.0), '',
            '| epochs | updates in the slide | largest loss from the slide\'s '
            'start on | its position in the slide | loss at the run\'s end |',
            '|---|---|---|---|---|']
        for r in sorted(handover, key=lambda r: r['epochs']):
            per_epoch = plan.n_train / r['total_minibatch']
            points = [(handover_position(i / per_epoch, r['epochs']), loss)
                      for i, loss in r['losses']]
            after = [p for p in points if p[0] >= 0] or points
            worst = max(after, key=lambda p: p[1])
            text.append('| {} | {:.1f} | {:.3f} | {:+.2f} | {:.3f} |'.format(
                r['epochs'], 2.5 / 90 * r['epochs'] * per_epoch, worst[1],
                worst[0], points[-1][1]))
        text += ['', '![training loss around the handover]'
                 '({}/handover.png)'.format(rel), '']
    if lr_ref is not None:
        examples = [planned[0], planned[1]] + handover_runs(plan, lr_ref)[-1:]
        examples = [run._replace(lr=lr_ref * run.k) for run in examples]
        text += ['Commands (`mpiexec -n 1 -x OMP_NUM_THREADS=1 python '
                 'train_imagenet.py ...`; the other runs change `--recipe` '
                 'and its flags, `--seed` and `--out`; the short handover '
                 'runs add `--scale-schedule` and stop earlier):', '', '```',
                 *('python train_imagenet.py ' + ' '.join(train_args(
                     run, plan, 'OUT/data/train.npz', 'OUT/data/val.npz',
                     'OUT/runs/' + run.name)) for run in examples), '```', '']
    train_s = sum(r['train_s'] for r in paper + handover)
    finished = (len(paper), len(handover)) == (len(planned),
                                               len(planned_handover))
    text += ['{:.1f} h of training time (the trainer\'s clock) in these '
             'runs{}.'.format(train_s / 3600, '' if finished else ' so far'),
             '']
    return text


#: RQ2's rows: the run without a technique, what it removes, the stage of
#: that run and of the akiba2017 it is read against on the paper's
#: schedule, and its pair in the short study (configuration, stage).
RQ2_ROWS = (
    ('no-rmsprop-warmup', 'RMSprop warm-up', 'paper-ablation',
     'paper-schedule', ('no-rmsprop-warmup', 'study')),
    ('no-slow-start', 'slow-start lr', 'paper-ablation', 'paper-schedule',
     ('no-slow-start', 'study')),
    ('no-final-batch-bn', 'final-batch BN', 'paper-ablation',
     'paper-schedule', ('no-final-batch-bn', 'study')),
    ('no-fp16-allreduce', 'fp16 all-reduce, every worker rounded',
     'paper-fp16', 'paper-fp16',
     ('akiba2017-zero-init-fp32-allreduce', 'fp16-rerun')),
    ('sgd', 'all three: plain linear scaling', 'paper-ablation',
     'paper-schedule', ('sgd', 'study')),
)


def worth(results, config, stage, base_stage, k):
    """A technique's worth, seed by seed: top-1 of the whole recipe at
    ``k`` (what ``config`` ablates, else ``akiba2017``; of ``base_stage``)
    minus that of ``config`` of ``stage`` without it, None where either
    diverged; ``{seed: worth}``."""
    top1 = {(r['stage'], r['config'], r['seed']): None if r['diverged']
            else r['top1'] for r in results if r['k'] == k}
    base = ablated(CONFIG[config]) or CONFIG['akiba2017']
    found = {}
    for (st, name, seed), value in top1.items():
        other = top1.get((base_stage, base.name, seed), False)
        if (st, name) == (stage, config) and other is not False:
            found[seed] = None if None in (value, other) else other - value
    return dict(sorted(found.items()))


def _worth_text(found):
    """``+1.23 (3 seeds, std 0.45)`` of :func:`worth`'s result, in points."""
    values = [v for v in found.values() if v is not None]
    if not found:
        return '-'
    if not values:
        return 'diverged'
    text = '{:+.2f}'.format(100 * numpy.mean(values))
    if len(found) > 1:
        text += ' ({} seeds{})'.format(len(found), ', std {:.2f}'.format(
            100 * numpy.std(values, ddof=1)) if len(values) > 1 else '')
    return text


def paper_rq2_text(plan, results):
    """RQ2 on the paper's schedule: each technique's worth at its epochs
    beside its worth in the 7-epoch study, with the seed spread."""
    rq2 = [r for r in results if r['stage'] in ('paper-ablation',
                                                'paper-fp16')]
    planned = len(plan.paper_ablation_runs) + len(plan.paper_fp16_runs)
    text = [
        '### RQ2 on the paper\'s schedule: what each technique is worth',
        '', '{} of {} runs finished. A technique\'s worth is the top-1 of '
        '`akiba2017` minus that of the run without it, same seed, in points '
        '(positive: the recipe needs it; for the fp16 all-reduce, negative '
        'is what rounding costs); at {} epochs against `akiba2017` of the '
        'table above, the fp16 pair against its own `akiba2017` trained '
        'with every virtual worker rounded; beside it the same measure in '
        'the {}-epoch study (the fp16 row: its rerun on '
        '`akiba2017-zero-init`).'.format(len(rq2), planned,
                                         plan.paper_epochs, plan.epochs), '',
        '| removed | top-1 % at {} epochs (seed 0) | worth at {} epochs | '
        'worth at {} epochs |'.format(plan.paper_epochs, plan.paper_epochs,
                                      plan.epochs),
        '|---|---|---|---|']
    by_name = {(r['stage'], r['config'], r['seed']): r for r in results}
    for config, removed, stage, base_stage, (short, short_stage) in RQ2_ROWS:
        run = by_name.get((stage, config, 0))
        text.append('| {} (`{}`) | {} | {} | {} |'.format(
            removed, config, '-' if run is None else 'diverged'
            if run['diverged'] else fmt_percent(run['top1']),
            _worth_text(worth(results, config, stage, base_stage, plan.k)),
            _worth_text(worth(results, short, short_stage, short_stage,
                              plan.k))))
    spread = []
    for config, k in (('akiba2017', plan.k), ('reference', 1)):
        top1 = [by_name[key]['top1'] for key in sorted(by_name)
                if key[:2] == ('paper-schedule', config)
                and not by_name[key]['diverged']]
        if len(top1) > 1:
            spread.append('`{}` {} seeds: {}, range {:.2f} points'.format(
                config, len(top1), ', '.join(map(fmt_percent, top1)),
                100 * (max(top1) - min(top1))))
    text += ['', 'Seed spread at {} epochs: {}.'.format(
        plan.paper_epochs, '; '.join(spread) if spread else
        'not yet (fewer than two seeds of a configuration)'), '']
    return text


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
    outputs.write_replacing(page, lambda f: f.write(text), force=True,
                            text=True)

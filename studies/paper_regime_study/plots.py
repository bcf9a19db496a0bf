"""The study's plots: test top-1 against epochs, the plateau runs against
the study's, final top-1 against the total minibatch, the runs on the
paper's own schedule and the training loss around the RMSprop-to-SGD
handover."""
import os

import numpy

from largebatch import outputs
from optimizers import schedules
from studies.paper_regime_study.regime import CONFIGS


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
    with outputs.replacing(path, force=True,
                           suffix=os.path.splitext(path)[1]) as tmp:
        fig.savefig(tmp)
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


def plot_paper_curves(results, path):
    """Test top-1 against epochs of every run on the paper's schedule, one
    line per run (the seeds of a configuration share its colour)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    colors = {}
    for r in sorted(results, key=lambda r: (r['config'], r['seed'])):
        if r['stage'] != 'paper-schedule' or not r['curve']:
            continue
        epochs, acc = zip(*r['curve'])
        line, = ax.plot(epochs, [100 * a for a in acc], linewidth=1,
                        color=colors.get(r['config']),
                        label='{}, seed {}'.format(r['config'], r['seed']))
        colors.setdefault(r['config'], line.get_color())
    _save(plt, fig, ax, path, 'Fashion-MNIST, the paper\'s 90-epoch '
          'schedule')


def handover_position(epoch, epochs, center=10.0, period=5.0):
    """Where ``epoch`` of a run of ``epochs`` lies in the RMSprop-to-SGD
    slide laid out on it: 0 at its start (alpha_SGD = 0.5), 1 at its end
    (alpha_SGD = 1)."""
    paper_epoch = epoch * schedules.REFERENCE_EPOCHS / epochs
    return (paper_epoch - center) / (period / 2)


def plot_handover(runs, n_train, path):
    """The training loss of every update against its position in the
    slide, one line per run (``runs``: results of the handover stage)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for r in sorted(runs, key=lambda r: r['epochs']):
        iterations, losses = zip(*r['losses'])
        x = [handover_position(i * r['total_minibatch'] / n_train,
                               r['epochs']) for i in iterations]
        per_slide = (n_train / r['total_minibatch'] * r['epochs'] /
                     schedules.REFERENCE_EPOCHS * 2.5)
        ax.plot(x, losses, linewidth=1, marker='.', markersize=2,
                label='{} epochs ({:.0f} updates in the slide)'.format(
                    r['epochs'], per_slide))
    ax.axvspan(0, 1, color='k', alpha=0.08)
    ax.set_yscale('log')
    _save(plt, fig, ax, path, 'akiba2017, seed {}: the RMSprop-to-SGD '
          'handover'.format(runs[0]['seed']) if runs else '',
          xlabel='position in the slide (0: alpha_SGD = 0.5, 1: alpha_SGD '
          '= 1)', ylabel='training loss of the update')

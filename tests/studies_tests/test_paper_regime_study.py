"""studies.paper_regime_study: the regime, the runs and their arguments,
the choice of the reference lr, skipping finished runs and the page;
tests/integration runs the quick study."""
import json
import os
import re
import subprocess
import sys

import pytest

from largebatch.errors import InputError
from studies import trainer_runs
from studies.paper_regime_study import regime
from studies.paper_regime_study import report
from studies.paper_regime_study import runner


def value_of(args, flag):
    return args[args.index(flag) + 1]


def test_full_plan_is_the_papers_regime_on_the_whole_set():
    plan = regime.FULL
    assert plan.n_train == 60000 and plan.val_per_class == 1000
    assert plan.k == 128
    large = plan.b_ref * plan.k
    assert 0.02 <= large / plan.n_train <= 0.035
    assert large % plan.bn_batch == 0
    assert all(plan.b_ref * k % plan.bn_batch == 0 for k in plan.sweep_ks)
    assert plan.seeds >= 3 and plan.sweep_seeds >= 2


def test_each_ablation_changes_one_thing_against_akiba2017():
    akiba = regime.CONFIG['akiba2017']
    ablations = [c for c in regime.CONFIGS if c.name.startswith('no-')]
    assert len(ablations) == 4
    for config in ablations:
        assert config.flags[:2] == akiba.flags and len(config.flags) == 4


def test_zero_init_configs_add_zero_init_only():
    for name in ('akiba2017', 'reference'):
        base, config = regime.CONFIG[name], regime.CONFIG[name + '-zero-init']
        assert config.flags == base.flags + ['--zero-init-residual']
        assert config.k(regime.FULL) == base.k(regime.FULL)
    assert regime.CONFIG['reference'].k(regime.FULL) == 1


def test_study_runs_scale_the_reference_lr_linearly():
    plan = regime.FULL
    runs = regime.study_runs(plan, 0.02)
    assert len(runs) == (plan.seeds * len(regime.CONFIGS) + plan.sweep_seeds
                         * len(plan.sweep_ks) * 4 + 6)
    assert len({run.name for run in runs}) == len(runs)
    for run in runs:
        assert run.lr == pytest.approx(0.02 * run.k)
        assert run.epochs == (plan.plateau_epochs if run.stage == 'plateau'
                              else plan.epochs)
    # seed 0 of every configuration at k comes first, then the plateau runs
    # (3x the epochs) of the reference, the three recipes and the two
    # configurations with zero-init
    n = len(regime.CONFIGS)
    assert [r.k for r in runs[:n]] == [
        1 if c.name.startswith('reference') else 128 for c in regime.CONFIGS]
    plateau = runs[n:n + 6]
    assert plateau == regime.plateau_runs(plan, 0.02)
    assert [(r.config.name, r.k, r.seed, r.stage) for r in plateau] == [
        ('reference', 1, 0, 'plateau'), ('goyal2017', 128, 0, 'plateau'),
        ('akiba2017', 128, 0, 'plateau'), ('you2017', 128, 0, 'plateau'),
        ('reference-zero-init', 1, 0, 'plateau'),
        ('akiba2017-zero-init', 128, 0, 'plateau')]
    assert plateau[0].name == 'reference-plateau-seed0'
    assert plateau[2].name == 'akiba2017-k128-plateau-seed0'
    assert plateau[4].name == 'reference-zero-init-plateau-seed0'
    assert plan.plateau_epochs == 3 * plan.epochs


def test_train_args_use_virtual_workers_and_the_scaled_schedule():
    plan = regime.FULL
    runs = {run.name: run for run in regime.study_runs(plan, 0.02)}
    large = regime.train_args(runs['akiba2017-k128-seed2'], plan, 'T', 'V',
                              'O')
    assert {flag: value_of(large, flag) for flag in (
        '--batchsize', '--accumulate', '--seed', '--lr', '--epoch',
        '--val-interval', '--resume')} == {
        '--batchsize': '32', '--accumulate': '48', '--seed': '2',
        '--lr': '2.56', '--epoch': '7', '--val-interval': '1',
        '--resume': 'auto'}
    assert '--scale-schedule' in large
    reference = regime.train_args(runs['reference-seed0'], plan, 'T', 'V',
                                  'O')
    assert value_of(reference, '--batchsize') == '12'
    assert value_of(reference, '--accumulate') == '1'
    assert value_of(reference, '--bn-stats') == 'moving-average'
    ablation = regime.train_args(runs['no-slow-start-k128-seed0'], plan, 'T',
                                 'V', 'O')
    assert value_of(ablation, '--val-interval') == '7'  # at the end only


def test_peak_lr_follows_the_schedule():
    plan = regime.FULL
    runs = {run.name: run for run in regime.study_runs(plan, 0.02)}
    assert regime.peak_lr(runs['akiba2017-k128-seed0'], plan) == \
        pytest.approx(0.5 * 2.56)  # slow-start's first step
    assert regime.peak_lr(runs['goyal2017-k128-seed0'], plan) == \
        pytest.approx(2.56)


def result(name, lr, top1, stage='lr-sweep', diverged=False):
    return dict(name=name, stage=stage, config='reference', k=1, lr=lr,
                top1=None if diverged else top1, diverged=diverged)


def test_the_reference_lr_is_the_best_swept_one_once_all_finished():
    plan = regime.FULL._replace(lrs=(0.005, 0.01, 0.02, 0.04))
    rows = [result('a', 0.005, 0.80), result('b', 0.01, 0.85),
            result('c', 0.02, None, diverged=True)]
    assert runner.choose_lr(rows, plan) is None
    rows.append(result('d', 0.04, 0.83))
    assert runner.choose_lr(rows, plan) == 0.01


def test_a_run_with_a_stored_result_is_not_trained(tmp_path):
    plan = regime.QUICK
    run = regime.sweep_runs(plan)[0]
    path = runner.result_path(str(tmp_path / 'results'), run.name)
    os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        json.dump({'name': run.name, 'top1': 0.5}, f)
    assert runner.run_one(run, plan, ('T', 'V'), str(tmp_path / 'out'),
                          str(tmp_path / 'results'), 'no-trainer') == {
        'name': run.name, 'top1': 0.5}
    assert not os.path.exists(tmp_path / 'out')


def test_another_plan_in_the_same_results_is_refused(tmp_path):
    runner.check_plan(str(tmp_path), regime.QUICK)
    runner.check_plan(str(tmp_path), regime.QUICK._replace(seeds=5))
    with pytest.raises(InputError, match='another plan'):
        runner.check_plan(str(tmp_path), regime.QUICK._replace(epochs=3))


def test_paper_runs_in_another_order_or_with_other_seeds_are_one_plan(
        tmp_path):
    runs = regime.FULL.paper_runs
    runner.check_plan(str(tmp_path), regime.FULL)
    runner.check_plan(str(tmp_path), regime.FULL._replace(
        paper_runs=tuple(reversed(runs))))
    runner.check_plan(str(tmp_path), regime.FULL._replace(
        paper_runs=runs + (('you2017', 1), ('reference', 2))))
    runner.check_plan(str(tmp_path), regime.FULL._replace(
        paper_runs=runs + (('reference', 2),)))
    with pytest.raises(InputError, match='another plan'):
        runner.check_plan(str(tmp_path), regime.FULL._replace(
            paper_runs=runs + (('sgd', 0),)))
    with pytest.raises(InputError, match='another plan'):
        runner.check_plan(str(tmp_path), regime.FULL._replace(
            paper_runs=tuple(r for r in runs if r[0] != 'you2017')))


def test_the_page_keeps_its_text_around_the_generated_block(tmp_path):
    results = str(tmp_path / 'results')
    runner.check_plan(results, regime.QUICK)
    page = str(tmp_path / 'page.md')
    with open(page, 'w') as f:
        f.write('# Title\n\n{}\nold\n{}\n\n## Reading\n'.format(
            report.BEGIN, report.END))
    report.write_page(regime.QUICK, results, page)
    text = open(page).read()
    assert text.startswith('# Title\n') and text.endswith('## Reading\n')
    assert 'old' not in text and '0 of 23 runs finished' in text
    assert 'no pair of a run and its reference finished yet' in text
    with open(os.path.join(results, 'results.json')) as f:
        assert json.load(f)['runs'] == []


def test_each_recipe_is_read_against_the_reference_with_its_zero_init():
    names = {name: regime.baseline(regime.CONFIG[name]).name
             for name in ('sgd', 'goyal2017', 'akiba2017', 'you2017',
                          'no-slow-start', 'akiba2017-zero-init')}
    assert names == dict(
        sgd='reference', goyal2017='reference-zero-init',
        akiba2017='reference', you2017='reference',
        **{'no-slow-start': 'reference',
           'akiba2017-zero-init': 'reference-zero-init'})


def study_result(config, k, seed, top1):
    return dict(stage='study', config=config, k=k, seed=seed,
                top1=top1, diverged=top1 is None)


def test_gaps_pair_each_run_with_its_reference_of_the_same_seed():
    results = [
        study_result('reference', 1, 0, 0.80),
        study_result('reference', 1, 1, 0.82),
        study_result('reference-zero-init', 1, 0, 0.85),
        study_result('akiba2017', 128, 0, 0.75),
        study_result('akiba2017', 128, 1, 0.79),
        study_result('akiba2017', 32, 0, 0.81),
        study_result('goyal2017', 128, 0, 0.84),
        study_result('goyal2017', 128, 1, None),  # no reference-zero-init 1
        study_result('sgd', 128, 0, None),
        study_result('you2017', 128, 2, 0.80),  # no reference of seed 2
    ]
    rows = {(r['config'], r['k']): r
            for r in report.gaps(results, regime.baseline)}
    assert list(rows) == [('sgd', 128), ('goyal2017', 128),
                          ('akiba2017', 128), ('akiba2017', 32)]
    akiba = rows['akiba2017', 128]
    assert akiba['baseline'] == 'reference' and akiba['seeds'] == [0, 1]
    assert akiba['gaps'] == pytest.approx([-0.05, -0.03])
    assert akiba['mean'] == pytest.approx(-0.04)
    assert akiba['std'] == pytest.approx(0.02 / 2 ** 0.5)
    goyal = rows['goyal2017', 128]
    assert goyal['baseline'] == 'reference-zero-init'
    assert goyal['seeds'] == [0] and goyal['gaps'] == [pytest.approx(-0.01)]
    assert goyal['std'] is None
    assert rows['sgd', 128]['gaps'] == [None]
    assert rows['sgd', 128]['mean'] is None
    text = report.gap_table(report.gaps(results, regime.baseline))
    assert '| `akiba2017` | 128 | `reference` | 2 | -4.00 | 1.41 | ' \
        '-5.00, -3.00 |' in text
    assert '| `sgd` | 128 | `reference` | 1 | - | - | diverged |' in text


def test_ablations_pair_each_run_with_the_whole_recipe_at_its_k():
    results = [
        study_result('reference', 1, 0, 0.80),
        study_result('akiba2017', 128, 0, 0.75),
        study_result('akiba2017', 128, 1, 0.79),
        study_result('akiba2017', 32, 0, 0.81),
        study_result('no-slow-start', 128, 0, 0.70),
        study_result('no-slow-start', 128, 1, 0.72),
        study_result('no-rmsprop-warmup', 128, 2, 0.40),  # no akiba2017 2
    ]
    (row,) = report.gaps(results, regime.ablated)
    assert (row['config'], row['k'], row['baseline']) == (
        'no-slow-start', 128, 'akiba2017')
    assert row['seeds'] == [0, 1]
    assert row['gaps'] == pytest.approx([-0.05, -0.07])
    assert regime.ablated(regime.CONFIG['akiba2017-zero-init']) is None
    assert regime.baseline(regime.CONFIG['reference']) is None


def test_missing_fashion_mnist_says_how_to_install_it(tmp_path):
    with pytest.raises(InputError, match='apt-get install dataset-fashion'):
        runner.prepare_data(str(tmp_path), str(tmp_path / 'none'),
                            regime.QUICK)


def test_paper_schedule_runs_keep_the_papers_epochs():
    plan = regime.FULL
    runs = regime.paper_schedule_runs(plan, 0.01)
    assert [(r.config.name, r.seed) for r in runs] == list(
        regime.PAPER_SCHEDULE_RUNS)
    assert runs[0].name == 'akiba2017-k128-paper90-seed0'
    assert runs[1].name == 'reference-paper90-seed0'
    for run in runs:
        assert run.stage == 'paper-schedule' and run.epochs == 90
        args = regime.train_args(run, plan, 'T', 'V', 'O')
        assert '--scale-schedule' not in args and '--iterations' not in args
        assert value_of(args, '--epoch') == '90'
        assert value_of(args, '--val-interval') == '2'
        assert run.lr == pytest.approx(0.01 * run.k)


def test_handover_runs_stop_past_the_slide_and_log_every_update():
    plan = regime.FULL
    runs = regime.handover_runs(plan, 0.01)
    assert [r.epochs for r in runs] == [7, 21, 90]
    assert [r.scaled for r in runs] == [True, True, False]
    per_epoch = plan.n_train / (plan.b_ref * plan.k)
    for run in runs:
        assert run.seed == 2 and run.config.name == 'akiba2017'
        # the slide ends at 12.5 of 90 epochs; the run goes on to 15
        stop = run.iterations / per_epoch * 90 / run.epochs
        assert 15 <= stop < 15 + 90 / run.epochs / per_epoch
        args = regime.train_args(run, plan, 'T', 'V', 'O')
        assert value_of(args, '--iterations') == str(run.iterations)
        assert value_of(args, '--log-interval') == '1'
        assert ('--scale-schedule' in args) == run.scaled
    order = [r.name for r in regime.paper_stage_runs(plan, 0.01)]
    assert order[:4] == [
        'akiba2017-k128-handover7-seed2', 'akiba2017-k128-handover21-seed2',
        'akiba2017-k128-paper90-seed0', 'akiba2017-k128-handover90-seed2']
    assert len(set(order)) == len(order) == 3 + len(plan.paper_runs)
    quick = [r.name for r in regime.paper_stage_runs(regime.QUICK, 0.01)]
    assert len(set(quick)) == len(quick)


def test_a_plan_that_adds_stages_continues_the_stored_study(tmp_path):
    older = {k: v for k, v in regime.QUICK._asdict().items()
             if not k.startswith('paper_')}
    with open(tmp_path / 'plan.json', 'w') as f:
        json.dump(older, f)
    runner.check_plan(str(tmp_path), regime.QUICK)
    with pytest.raises(InputError, match='another plan'):
        runner.check_plan(str(tmp_path), regime.QUICK._replace(k=8))


def test_parked_snapshots_carry_unfinished_runs_to_another_machine(
        tmp_path):
    plan = regime.QUICK
    first, second = regime.sweep_runs(plan)
    root, results = str(tmp_path / 'out'), str(tmp_path / 'results')
    for run, iterations in ((first, (3, 12)), (second, (5,))):
        folder = os.path.join(root, 'runs', run.name)
        os.makedirs(folder)
        for i in iterations:
            with open(os.path.join(folder, 'snapshot_iter_%d' % i), 'w') as f:
                f.write(str(i))
    os.makedirs(os.path.join(results, 'runs'))
    with open(runner.result_path(results, second.name), 'w') as f:
        json.dump({}, f)  # finished: nothing to park
    assert runner.park(root, results, [first, second]) == [first.name]
    parked = runner.parked_dir(results, first.name)
    assert runner.snapshots_in(parked) == ['snapshot_iter_12']
    # a fresh machine: the run starts from the parked snapshot
    fresh = str(tmp_path / 'fresh')
    os.makedirs(fresh)
    runner.unpark(first.name, fresh, results)
    assert open(os.path.join(fresh, 'snapshot_iter_12')).read() == '12'
    # a run with snapshots of its own keeps them
    with open(os.path.join(fresh, 'snapshot_iter_20'), 'w') as f:
        f.write('20')
    runner.unpark(first.name, fresh, results)
    assert runner.snapshots_in(fresh) == ['snapshot_iter_12',
                                          'snapshot_iter_20']


def paper_result(config, k, seed, top1, stage='paper-schedule', **extra):
    return dict(dict(
        name='{}-k{}-{}-seed{}'.format(config, k, stage, seed), stage=stage,
        config=config, k=k, seed=seed, top1=top1, diverged=False, lr=0.01 * k,
        peak_lr=0.01 * k, total_minibatch=12 * k, share=12 * k / 60000,
        epochs=90, curve=[(2.0, 0.5), (90.0, top1 or 0.0)], train_s=10.0,
        wall_s=10.0, finished=1.0, source='test'), **extra)


def handover_result(epochs):
    """A handover run whose loss peaks in the slide (paper epochs 10 to
    12.5)."""
    per_epoch = 60000 / 1536
    losses = [(i, 5.0 if 11 <= i / per_epoch * 90 / epochs < 12 else 1.0)
              for i in range(1, int(15 / 90 * epochs * per_epoch) + 1)]
    return paper_result('akiba2017', 128, 2, None, 'handover',
                        epochs=epochs, losses=losses, curve=[])


def test_the_paper_schedule_section_reads_gaps_and_the_handover(tmp_path):
    results = [paper_result('reference', 1, 0, 0.85),
               paper_result('akiba2017', 128, 0, 0.84),
               paper_result('akiba2017', 128, 1, 0.80)]
    results += [handover_result(epochs) for epochs in (7, 90)]
    text = '\n'.join(report.paper_schedule_text(
        regime.FULL, results, str(tmp_path), '.', 0.01))
    assert '3 of 9 runs on the paper\'s schedule and 2 of 3 handover runs' \
        in text
    # seed 1 has no reference run yet: only seed 0 is paired
    assert '| `akiba2017` | 128 | `reference` | 1 | -1.00 | - | -1.00 |' \
        in text
    assert '| 7 | 7.6 | 5.000 |' in text and '| 90 | 97.7 | 5.000 |' in text
    for name in ('paper_curves.png', 'handover.png'):
        assert os.path.getsize(tmp_path / name) > 0
    assert '--epoch 90' in text and '--iterations 586' in text
    assert 'in these runs so far.' in text


def test_the_paper_schedule_section_says_when_every_run_is_in(tmp_path):
    plan = regime.FULL
    results = [paper_result(name, 1 if name.startswith('reference') else 128,
                            seed, 0.9) for name, seed in plan.paper_runs]
    results += [handover_result(epochs) for epochs in (
        plan.epochs, plan.plateau_epochs, plan.paper_epochs)]
    text = '\n'.join(report.paper_schedule_text(
        plan, results, str(tmp_path), '.', 0.01))
    assert '9 of 9 runs on the paper\'s schedule and 3 of 3' in text
    assert '0.0 h of training time (the trainer\'s clock) in these ' \
        'runs.' in text


def test_handover_position_is_zero_and_one_at_the_ends_of_the_slide():
    from studies.paper_regime_study.plots import handover_position
    assert handover_position(10.0, 90) == pytest.approx(0.0)
    assert handover_position(12.5, 90) == pytest.approx(1.0)
    assert handover_position(12.5 * 7 / 90, 7) == pytest.approx(1.0)


def test_the_fp16_rerun_pair_differs_by_the_allreduce_only():
    plan = regime.FULL
    runs = regime.fp16_rerun_runs(plan, 0.01)
    assert [(r.config.name, r.seed) for r in runs] == [
        (name, seed) for seed in range(plan.seeds)
        for name in regime.FP16_RERUN_CONFIGS]
    base, twin = (regime.CONFIG[name] for name in regime.FP16_RERUN_CONFIGS)
    assert twin.flags == base.flags + ['--allreduce-dtype', 'float32']
    assert regime.ablated(twin) is base
    study = {r.name for r in regime.study_runs(plan, 0.01)}
    for run in runs:
        assert run.stage == 'fp16-rerun' and run.name not in study
        args = regime.train_args(run, plan, 'T', 'V', 'O')
        assert '--scale-schedule' in args
        assert value_of(args, '--epoch') == str(plan.epochs)
        assert value_of(args, '--accumulate') == '48'
    # the twin is read against the float16 run of the same seed and stage
    rerun = [dict(study_result(name, 128, seed, top1), stage='fp16-rerun')
             for name, seed, top1 in ((base.name, 0, 0.86), (twin.name, 0,
                                      0.85), (twin.name, 1, 0.84))]
    (row,) = report.gaps(rerun + [study_result(base.name, 128, 1, 0.9)],
                         regime.ablated, 'fp16-rerun')
    assert row['config'] == twin.name and row['seeds'] == [0]
    assert row['gaps'] == pytest.approx([-0.01])


def test_a_driver_trains_only_the_stages_it_is_given(tmp_path, monkeypatch):
    plan = regime.QUICK
    results = str(tmp_path / 'results')
    os.makedirs(os.path.join(results, 'runs'))
    for i, run in enumerate(regime.sweep_runs(plan)):
        runner.write_json(runner.result_path(results, run.name), dict(
            result(run.name, run.lr, 0.5 + i / 10), seed=0))
    trained = []
    monkeypatch.setattr(runner, 'prepare_data', lambda *a: ('T', 'V'))
    monkeypatch.setattr(runner, 'run_one',
                        lambda run, *a: trained.append(run) or {})
    runner.run_study(plan, str(tmp_path / 'out'), results, 'trainer', 1,
                     'idx', lambda: None, stages=('fp16-rerun',))
    assert [r.name for r in trained] == [
        r.name for r in regime.fp16_rerun_runs(plan, 0.02)]
    assert {r.lr for r in trained} == {0.02 * plan.k}
    trained.clear()
    runner.run_study(plan, str(tmp_path / 'out'), results, 'trainer', 1,
                     'idx', lambda: None)
    stages = [r.stage for r in trained]
    assert set(stages) == set(regime.STAGES)
    first, last = stages.index('fp16-rerun'), len(stages) - stages[
        ::-1].index('fp16-rerun')
    assert set(stages[:first]) == set(regime.COMPRESSED_STAGES)
    assert set(stages[last:]) == {'handover', 'paper-schedule',
                                  'paper-ablation', 'paper-fp16'}


def test_a_driver_trains_only_the_runs_it_is_named(tmp_path, monkeypatch):
    plan = regime.QUICK
    results = str(tmp_path / 'results')
    os.makedirs(os.path.join(results, 'runs'))
    sweep = regime.sweep_runs(plan)
    for run in sweep[1:]:
        runner.write_json(runner.result_path(results, run.name), dict(
            result(run.name, run.lr, 0.5), seed=0))
    trained = []
    monkeypatch.setattr(runner, 'prepare_data', lambda *a: ('T', 'V'))
    monkeypatch.setattr(runner, 'run_one', lambda run, *a: trained.append(
        run) or runner.write_json(runner.result_path(results, run.name),
                                  dict(result(run.name, run.lr, 0.6),
                                       seed=0)))
    rq2 = regime.paper_rq2_runs(plan, 0.02)
    names = (rq2[-1].name, sweep[0].name, rq2[0].name)
    runner.run_study(plan, str(tmp_path / 'out'), results, 'trainer', 1,
                     'idx', lambda: None, names=names)
    # the sweep first, then in the study's order
    assert [r.name for r in trained] == [
        sweep[0].name, rq2[0].name, rq2[-1].name]
    trained.clear()
    runner.run_study(plan, str(tmp_path / 'out'), results, 'trainer', 1,
                     'idx', lambda: None, stages=('paper-fp16',),
                     names=names)
    assert [r.name for r in trained] == [rq2[-1].name]
    with pytest.raises(InputError) as e:
        runner.run_study(plan, str(tmp_path / 'out'), results, 'trainer', 1,
                         'idx', lambda: None, names=('reference-seed9',
                                                     rq2[0].name))
    assert str(e.value) == ('no run named reference-seed9 (the names of '
                            'docs/large_batch_study/runs)')


def test_rq2_runs_on_the_papers_schedule_are_their_own_stages():
    plan = regime.FULL
    runs = regime.paper_rq2_runs(plan, 0.01)
    assert [r.name for r in runs] == [
        'no-rmsprop-warmup-k128-paper90-seed0',
        'no-slow-start-k128-paper90-seed0',
        'no-final-batch-bn-k128-paper90-seed0', 'sgd-k128-paper90-seed0',
        'akiba2017-k128-paper90fp16-seed0',
        'no-fp16-allreduce-k128-paper90fp16-seed0']
    assert [r.stage for r in runs] == ['paper-ablation'] * 4 + [
        'paper-fp16'] * 2
    for run in runs:
        args = regime.train_args(run, plan, 'T', 'V', 'O')
        assert '--scale-schedule' not in args
        assert value_of(args, '--epoch') == '90'
        assert ('--allreduce-dtype' in args) == (
            run.config.name == 'no-fp16-allreduce')
    others = {r.name for r in regime.paper_stage_runs(plan, 0.01)}
    assert not others & {r.name for r in runs}
    assert ('reference', 1) in plan.paper_runs


def test_rq2_reads_each_technique_at_90_epochs_beside_7():
    results = [
        paper_result('akiba2017', 128, 0, 0.90),
        paper_result('akiba2017', 128, 1, 0.92),
        paper_result('reference', 1, 0, 0.89),
        paper_result('reference', 1, 1, 0.895),
        paper_result('no-slow-start', 128, 0, 0.87, stage='paper-ablation'),
        paper_result('sgd', 128, 0, None, stage='paper-ablation',
                     diverged=True),
        paper_result('akiba2017', 128, 0, 0.91, stage='paper-fp16'),
        paper_result('no-fp16-allreduce', 128, 0, 0.905, stage='paper-fp16'),
        study_result('akiba2017', 128, 0, 0.80),
        study_result('akiba2017', 128, 1, 0.82),
        study_result('no-slow-start', 128, 0, 0.70),
        study_result('no-slow-start', 128, 1, 0.76),
        dict(study_result('akiba2017-zero-init', 128, 0, 0.81),
             stage='fp16-rerun'),
        dict(study_result('akiba2017-zero-init-fp32-allreduce', 128, 0,
                          0.80), stage='fp16-rerun'),
    ]
    assert report.worth(results, 'no-slow-start', 'paper-ablation',
                        'paper-schedule', 128) == {0: pytest.approx(0.03)}
    text = '\n'.join(report.paper_rq2_text(regime.FULL, results))
    assert '4 of 6 runs finished.' in text
    assert '| slow-start lr (`no-slow-start`) | 87.00 | +3.00 | ' \
        '+8.00 (2 seeds, std 2.83) |' in text
    assert '| all three: plain linear scaling (`sgd`) | diverged | ' \
        'diverged | - |' in text
    assert '(`no-fp16-allreduce`) | 90.50 | +0.50 | +1.00 |' in text
    assert '| RMSprop warm-up (`no-rmsprop-warmup`) | - | - | - |' in text
    assert '`akiba2017` 2 seeds: 90.00, 92.00, range 2.00 points; ' \
        '`reference` 2 seeds: 89.00, 89.50, range 0.50 points.' in text


CPUINFO = '''processor\t: 0
model name\t: Some CPU
flags\t\t: fpu sse2 {}

processor\t: 1
model name\t: Another CPU
flags\t\t: fpu
'''


@pytest.mark.parametrize('flags, pinned', [('avx avx2 avx512f', True),
                                           ('avx', False)])
def test_runs_pin_the_avx2_blas_kernels_where_the_cpu_has_them(
        tmp_path, flags, pinned):
    path = tmp_path / 'cpuinfo'
    path.write_text(CPUINFO.format(flags))
    model, found = trainer_runs.cpu_info(str(path))
    assert model == 'Some CPU' and found[-1] == flags.split()[-1]
    assert trainer_runs.blas_environment(found) == (
        {'OPENBLAS_CORETYPE': 'Haswell'} if pinned else {})


CORENAME = '''
import ctypes, numpy
names = ('openblas_get_corename', 'openblas_get_corename64_',
         'scipy_openblas_get_corename', 'scipy_openblas_get_corename64_')
with open('/proc/self/maps') as f:
    libs = {line.split()[-1] for line in f if 'openblas' in line.lower()}
for path in sorted(libs):
    for name in names:
        corename = getattr(ctypes.CDLL(path), name, None)
        if corename is not None:
            corename.restype = ctypes.c_char_p
            print(corename().decode())
'''


def test_the_pin_gives_a_run_openblas_avx2_kernels():
    """What NumPy's OpenBLAS runs in a trainer's environment."""
    pin = trainer_runs.blas_environment(trainer_runs.cpu_info()[1])
    if not pin:
        pytest.skip('no AVX2: OpenBLAS runs its generic kernels')
    env = dict(os.environ, OPENBLAS_NUM_THREADS='1', **pin)
    corenames = subprocess.run(
        [sys.executable, '-c', CORENAME], check=True, capture_output=True,
        text=True, env=env).stdout.split()
    if not corenames:
        pytest.skip('NumPy without OpenBLAS')
    assert corenames == ['Haswell']


def test_the_page_names_the_machines_runs_recorded():
    runs = [dict(paper_result('sgd', 128, 0, 0.9), machine='CPU x 2',
                 blas_kernels='Haswell'),
            dict(paper_result('sgd', 128, 1, 0.9), machine='CPU x 2',
                 blas_kernels=None),
            paper_result('sgd', 128, 2, 0.9)]
    assert report.machines_text(runs) == [
        '- trained on: CPU x 2, OpenBLAS kernels: Haswell',
        "- trained on: CPU x 2, OpenBLAS kernels: the CPU's own",
        '- not recorded (see the Reading): 1 runs, finished before runs '
        'recorded their machine']


def report_only(results, page):
    return subprocess.run(
        [sys.executable, '-m', 'studies.paper_regime_study', '--report-only',
         '--quick', '--results', str(results), '--page', str(page)],
        cwd=trainer_runs.REPO, capture_output=True, text=True, timeout=300)


def test_a_truncated_result_is_one_line_and_kept(tmp_path):
    """A result cut short (a copy, a full disk elsewhere) is named, not
    trained over: the user moves it away to train its run again."""
    run = regime.sweep_runs(regime.QUICK)[0]
    path = runner.result_path(str(tmp_path / 'results'), run.name)
    os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        f.write('{"name": "' + run.name)
    with pytest.raises(runner.InputError, match='move it away to train its '
                       'run again$'):
        runner.run_one(run, regime.QUICK, ('T', 'V'), str(tmp_path / 'out'),
                       str(tmp_path / 'results'), 'no-trainer')
    assert not os.path.exists(tmp_path / 'out')
    proc = report_only(tmp_path / 'results', tmp_path / 'page.md')
    assert proc.returncode == 2
    assert proc.stderr.startswith('paper_regime_study: error: {}: not a '
                                  'whole JSON file ('.format(path))
    assert len(proc.stderr.splitlines()) == 1
    with open(path) as f:
        assert f.read() == '{"name": "' + run.name
    assert not os.path.exists(tmp_path / 'page.md')


@pytest.mark.parametrize('plan, line', [
    ('{"epochs": ', '{results}/plan.json: not a whole JSON file (.*); move it '
     'away or use another --results'),
    ('{"epochs": 999}', '{results} holds a study with another plan (.*); use '
     'another --results')])
def test_a_truncated_plan_or_another_plan_is_one_line(tmp_path, plan, line):
    (tmp_path / 'plan.json').write_text(plan)
    proc = report_only(tmp_path, tmp_path / 'page.md')
    assert proc.returncode == 2
    assert re.fullmatch('paper_regime_study: error: ' + line.format(
        results=re.escape(str(tmp_path))) + '\n', proc.stderr), proc.stderr
    assert (tmp_path / 'plan.json').read_text() == plan

"""benchmarks.large_batch_study: the configurations, the plan and the
arguments it trains with; tests/integration runs the quick study."""
import pytest

from benchmarks import large_batch_study as study


def test_each_configuration_changes_one_thing_against_akiba2017():
    akiba = next(c for c in study.CONFIGS if c.name == 'akiba2017')
    ablations = [c for c in study.CONFIGS if c.name.startswith('no-')]
    assert len(ablations) == 4
    for config in ablations:
        assert config.large and config.flags[:2] == akiba.flags
        assert len(config.flags) == 4


def test_full_plan_is_about_2_6_percent_per_step_in_whole_bn_batches():
    plan = study.FULL
    assert 0.024 <= plan.large_total / plan.n_train <= 0.027
    assert plan.large_total % plan.bn_batch == 0
    assert plan.n_train % plan.large_total == 0
    assert plan.val_per_class == 1000  # the whole 10k test set
    assert plan.seeds >= 3


def test_train_args_use_virtual_workers_and_the_scaled_schedule():
    plan = study.FULL
    config = next(c for c in study.CONFIGS if c.name == 'sgd')
    args = study.train_args(config, 2, plan, 'T', 'V', 'O')
    value = {flag: args[args.index(flag) + 1]
             for flag in ('--accumulate', '--batchsize', '--seed',
                          '--log-interval', '--resume', '--width')}
    assert value == {'--accumulate': '8', '--batchsize': '32', '--seed': '2',
                     '--log-interval': '10', '--resume': 'auto',
                     '--width': '0.125'}
    assert '--scale-schedule' in args


def test_missing_fashion_mnist_says_how_to_install_it(tmp_path):
    with pytest.raises(SystemExit, match='apt-get install dataset-fashion'):
        study.prepare_data(str(tmp_path), str(tmp_path / 'none'),
                           study.QUICK)

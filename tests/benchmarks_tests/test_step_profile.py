"""benchmarks.step_profile: each region counts its own time once, and the
kinds of a step cover its wall time."""
import chainer
import pytest

from benchmarks import step_profile
from benchmarks import train_step
from cpu_engine import onednn

CONVOLUTION_KINDS = ('conv forward', 'conv backward-data',
                     'conv backward-weights')


def _profile(steps, onednn_on=True):
    recipe = train_step.parse_args([]).recipe
    step, _, optimizer = train_step.chainer_step(32, 2, recipe)
    with chainer.using_config('cpu_onednn', onednn_on):
        with step_profile.StepProfile(optimizer) as profile:
            for _ in range(steps):
                step()
    return profile


def test_inner_regions_are_taken_out_of_the_outer_one(monkeypatch):
    clock = iter([0.0, 1.0, 3.0, 10.0])
    monkeypatch.setattr(step_profile.time, 'perf_counter',
                        lambda: next(clock))
    profile = step_profile.StepProfile(optimizer=None)
    profile._enter('conv forward')
    profile._enter('reorder')
    profile._exit()
    profile._exit()
    assert profile.seconds == {'reorder': 3.0 - 1.0,
                               'conv forward': 10.0 - (3.0 - 1.0)}


@pytest.mark.parametrize('onednn_on', [True, False])
def test_every_kind_of_a_step_is_seen_and_none_twice(onednn_on):
    profile = _profile(2, onednn_on)
    seconds = profile.per_step(2)
    assert set(seconds) == set(step_profile.KINDS)
    assert sum(seconds.values()) == pytest.approx(profile.wall / 2)
    # The timed kinds fit in the wall time: nothing is counted twice.
    assert seconds['other'] >= 0
    for kind in CONVOLUTION_KINDS + ('batch norm', 'relu', 'pooling',
                                     'fork', 'update'):
        assert seconds[kind] > 0, kind
    uses_reorders = onednn_on and onednn.available()
    assert (seconds['reorder'] > 0) == uses_reorders


def test_the_engine_is_restored_on_exit():
    originals = (onednn._execute, step_profile.convolution_2d._convolve,
                 step_profile.convolution_2d._correlate)
    profile = _profile(1)
    assert (onednn._execute, step_profile.convolution_2d._convolve,
            step_profile.convolution_2d._correlate) == originals
    assert 'update' not in vars(next(profile.optimizer.target.params())
                                .update_rule)
    assert not chainer.get_function_hooks()


def test_every_node_of_the_engine_has_its_kind():
    nodes = set()

    class Seen(chainer.FunctionHook):
        def forward_preprocess(self, function, in_data):
            nodes.add(type(function))

        def backward_preprocess(self, function, in_data, out_grad):
            nodes.add(type(function))

    recipe = train_step.parse_args([]).recipe
    step, _, _ = train_step.chainer_step(32, 2, recipe)
    with Seen():
        step()
    engine = {node for node in nodes if node.__module__.startswith(
        ('cpu_engine.', 'chainer.functions.normalization.'))}
    assert engine and engine <= set(step_profile._NODE_KINDS)

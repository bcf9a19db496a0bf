"""Recipes: their flags, hooks, schedule extensions and resume."""
import argparse
import dataclasses
import json
import math
import os
import re

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import training
from chainer.training import extensions as chainer_extensions
import chainermn
import numpy
import pytest

from largebatch import errors
import extensions
from optimizers import schedules
from optimizers import CorrectedMomentumSGD
from optimizers import recipes
from optimizers import RMSpropWarmup
from optimizers.weight_decay import WeightDecay
from imagenet_job import arguments


def make_recipe(*argv):
    """The recipe that the training script resolves from ``argv``."""
    parser = argparse.ArgumentParser(prog='train')
    parser.add_argument('--epoch', type=int, default=90)
    arguments.add_recipe_arguments(parser)
    args = parser.parse_args(list(argv))
    return arguments.recipe_of(args, args.epoch)


@pytest.mark.parametrize('name, expected', [
    ('akiba2017', dict(optimizer='rmsprop-warmup', lr_schedule='slow-start',
                       weight_decay_exempt='none', zero_init_residual=False,
                       lr_rmsprop=3e-4, mu2=0.99, eps=1e-8,
                       warmup_center=10.0, warmup_period=5.0,
                       alpha_sgd_form='elu')),
    ('goyal2017', dict(optimizer='momentum-sgd', momentum_correction=True,
                       lr_schedule='goyal', weight_decay_exempt='bn',
                       zero_init_residual=True, lr_rmsprop=None, mu2=None)),
    ('sgd', dict(optimizer='momentum-sgd', momentum_correction=False,
                 lr_schedule='constant', weight_decay_exempt='none',
                 zero_init_residual=False)),
])
def test_recipe_defaults(name, expected):
    recipe = make_recipe('--recipe', name)
    assert recipe == recipes.resolve(name)
    for setting, value in dict(expected, momentum=0.9, weight_decay=1e-4,
                               scale_schedule=False, lr=None).items():
        assert getattr(recipe, setting) == value, setting


def test_default_recipe_is_akiba2017():
    assert make_recipe().name == 'akiba2017'


def test_explicit_flags_override_the_recipe():
    recipe = make_recipe('--recipe', 'goyal2017', '--no-zero-init-residual',
                         '--lr-schedule', 'slow-start', '--weight-decay', '0',
                         '--weight-decay-exempt', 'bn-bias', '--momentum',
                         '0.8', '--no-momentum-correction')
    assert (recipe.zero_init_residual, recipe.lr_schedule,
            recipe.weight_decay, recipe.weight_decay_exempt, recipe.momentum,
            recipe.momentum_correction) == (False, 'slow-start', 0.0,
                                            'bn-bias', 0.8, False)
    recipe = make_recipe('--recipe', 'sgd', '--optimizer', 'rmsprop-warmup',
                         '--zero-init-residual', '--mu2', '0.9')
    assert (recipe.optimizer, recipe.zero_init_residual, recipe.mu2,
            recipe.momentum_correction) == ('rmsprop-warmup', True, 0.9, True)


def test_recipe_is_immutable_and_left_unchanged():
    recipe = make_recipe('--epoch', '9', '--scale-schedule')
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.lr = 1.0
    before = dataclasses.asdict(recipe)
    optimizer = recipes.create_optimizer(recipe)
    optimizer.setup(Net())
    recipes.add_hooks(optimizer, recipe)
    recipes.hyperparameter_schedules(recipe, 256)
    assert dataclasses.asdict(recipe) == before


@pytest.mark.parametrize('argv, message', [
    (['--recipe', 'sgd', '--mu2', '0.9'],
     'mu2 must be unset unless the optimizer is rmsprop-warmup, got 0.9'),
    (['--optimizer', 'momentum-sgd', '--warmup-center', '3'],
     'warmup_center must be unset unless'),
    (['--no-momentum-correction'],
     'momentum_correction must be on with the rmsprop-warmup optimizer'),
    (['--momentum', '1.0'], 'momentum must be in [0, 1), got 1.0'),
    (['--lr', '0'], 'lr must be positive, got 0.0'),
    (['--weight-decay=-1e-4'], 'weight_decay must be non-negative'),
    (['--warmup-period', '0'], 'warmup_period must be positive'),
    (['--mu2', '1'], 'mu2 must be in [0, 1)'),
    (['--eps=-1'], 'eps must be non-negative, got -1.0'),
])
def test_bad_settings_name_the_parameter_and_value(argv, message):
    with pytest.raises(errors.ParameterError) as e:
        make_recipe(*argv)
    assert str(e.value).startswith(message)
    assert '--' not in str(e.value)


def test_unknown_recipe_and_setting():
    with pytest.raises(errors.ParameterError, match="recipe must be one of"):
        recipes.resolve('adam')
    with pytest.raises(TypeError, match='learning_rate'):
        recipes.resolve('sgd', learning_rate=0.1)


def test_create_optimizer_akiba2017():
    optimizer = recipes.create_optimizer(make_recipe())
    assert isinstance(optimizer, RMSpropWarmup)
    assert (optimizer.mu1, optimizer.mu2, optimizer.eps) == (0.9, 0.99, 1e-8)


def test_create_optimizer_goyal2017_is_corrected_momentum_sgd():
    optimizer = recipes.create_optimizer(
        make_recipe('--recipe', 'goyal2017', '--momentum', '0.8'))
    assert isinstance(optimizer, chainer.optimizers.CorrectedMomentumSGD)
    assert optimizer.momentum == 0.8
    lr = recipes.hyperparameter_schedules(
        make_recipe('--recipe', 'goyal2017'), 8192)['lr']
    assert lr(0) == pytest.approx(0.1)  # warm-up starts at 0.1


@pytest.mark.parametrize('argv, state', [
    ([], {'m', 'delta'}),
    (['--recipe', 'goyal2017'], {'v'}),
    (['--recipe', 'akiba2017', '--optimizer', 'momentum-sgd'], {'v'}),
    (['--recipe', 'sgd'], {'v'}),
    (['--recipe', 'sgd', '--momentum-correction'], {'v'}),
    (['--recipe', 'you2017'], {'v'}),
])
def test_momentum_sgd_keeps_one_buffer_per_parameter(argv, state):
    """Only RMSprop warm-up keeps the mean square m beside the momentum."""
    recipe = make_recipe(*argv)
    net = Net()
    optimizer = recipes.create_optimizer(recipe)
    optimizer.setup(net)
    recipes.add_hooks(optimizer, recipe)
    for p in net.params():
        p.grad = numpy.ones_like(p.array)
    optimizer.update()
    for p in net.params():
        assert set(p.update_rule.state) == state


def test_cpu_kernels_reach_the_optimizer_and_weight_decay():
    calls = []

    class Kernels:
        def corrected_momentum_sgd(self, theta, g, v, lr, momentum):
            calls.append('corrected_momentum_sgd')
            v *= momentum
            v -= g
            theta += lr * v

        def weight_decay(self, g, theta, rate):
            calls.append('weight_decay')
            g += rate * theta
    recipe = make_recipe('--recipe', 'goyal2017')
    net = Net()
    optimizer = recipes.create_optimizer(recipe, Kernels())
    assert isinstance(optimizer, CorrectedMomentumSGD)
    optimizer.setup(net)
    recipes.add_hooks(optimizer, recipe, Kernels())
    for p in net.params():
        p.grad = numpy.ones_like(p.array)
    optimizer.update()
    decayed = len(list(net.params())) - 2  # BN's gamma and beta exempt
    assert sorted(calls) == sorted(
        ['corrected_momentum_sgd'] * len(list(net.params()))
        + ['weight_decay'] * decayed)


def test_create_optimizer_sgd_is_chainer_momentum_sgd():
    recipe = make_recipe('--recipe', 'sgd')
    optimizer = recipes.create_optimizer(recipe)
    assert type(optimizer) is chainer.optimizers.MomentumSGD
    assert optimizer.momentum == 0.9
    assert recipes.hyperparameter_schedules(recipe, 32768)['lr'](
        0) == pytest.approx(12.8)
    assert recipes.hyperparameter_schedules(
        make_recipe('--recipe', 'sgd', '--lr', '0.5'), 32768)['lr'](0) == 0.5


def test_schedules_of_akiba2017():
    schedule = recipes.hyperparameter_schedules(make_recipe(), 32768)
    lr, a_sgd, a_rms = [schedule[k]
                        for k in ('lr', 'alpha_sgd', 'alpha_rmsprop')]
    assert lr(0) == pytest.approx(6.4)
    assert a_sgd(0) == pytest.approx(0.5 * math.exp(-4))
    assert a_rms(0) == pytest.approx((1 - 0.5 * math.exp(-4)) * 3e-4 / 6.4)
    assert lr(39.9) == pytest.approx(6.4)
    assert lr(40) == pytest.approx(0.96)
    assert a_sgd(11) == pytest.approx(0.7)
    assert a_rms(11) == pytest.approx(0.3 * 3e-4 / 6.4)
    assert a_rms(13) == 0.0


def test_scaled_schedules_follow_the_run_length():
    s = recipes.hyperparameter_schedules(
        make_recipe('--epoch', '9', '--scale-schedule', '--lr-rmsprop',
                    '1e-3', '--alpha-sgd-form', 'double-slope'), 1024)
    # lr boundaries 40/70/85 -> 4/7/8.5; warm-up centre 10 -> 1, period 0.5
    assert s['lr'](4 - 1e-9) == pytest.approx(0.2)
    assert s['lr'](4) == pytest.approx(0.03)
    assert s['lr'](8.5) == pytest.approx(0.0004)
    assert s['alpha_sgd'](1.0) == pytest.approx(0.5)
    assert s['alpha_sgd'](1.1) == pytest.approx(0.9)
    assert s['alpha_sgd'](1.25) == 1.0
    assert s['alpha_rmsprop'](1.0) == pytest.approx(0.5 * 1e-3 / 0.2)
    goyal = recipes.hyperparameter_schedules(
        make_recipe('--recipe', 'goyal2017', '--epoch', '18',
                    '--scale-schedule'), 8192)
    assert set(goyal) == {'lr'}
    assert goyal['lr'](0.5) == pytest.approx(1.65)  # half of the 1-epoch ramp
    assert goyal['lr'](6) == pytest.approx(0.32)


class Net(chainer.Chain):

    def __init__(self):
        super(Net, self).__init__()
        with self.init_scope():
            self.l1 = L.Linear(4, 6)
            self.bn = L.BatchNormalization(6)
            self.l2 = L.Linear(6, 3)

    def forward(self, x):
        return self.l2(F.relu(self.bn(self.l1(x))))


ALL_PARAMS = {'/l1/W', '/l1/b', '/bn/gamma', '/bn/beta', '/l2/W', '/l2/b'}


@pytest.mark.parametrize('flags, undecayed', [
    (['--weight-decay-exempt', 'none'], set()),
    (['--weight-decay-exempt', 'bn'], {'/bn/gamma', '/bn/beta'}),
    (['--weight-decay-exempt', 'bn-bias'],
     {'/bn/gamma', '/bn/beta', '/l1/b', '/l2/b'}),
    (['--weight-decay', '0'], ALL_PARAMS),
])
def test_weight_decay_exemptions(flags, undecayed):
    recipe = make_recipe('--recipe', 'sgd', '--weight-decay', '0.01',
                         '--lr', '1.0', *flags)
    net = Net()
    for p in net.params():
        p.array[...] = 1.0
    optimizer = recipes.create_optimizer(recipe)
    optimizer.setup(net)
    recipes.add_hooks(optimizer, recipe)
    optimizer.lr = 1.0
    net.cleargrads()
    optimizer.update()  # zero gradients: only the decay moves a parameter
    assert {name for name, _ in net.namedparams()} == ALL_PARAMS
    for name, p in net.namedparams():
        expected = 1.0 if name in undecayed else 1.0 - 0.01
        numpy.testing.assert_allclose(p.array, expected, rtol=1e-6,
                                      err_msg=name)


N_EXAMPLES, BATCH, EPOCHS = 320, 8, 2   # 40 iterations per epoch


def dataset():
    rng = numpy.random.RandomState(0)
    return chainer.datasets.TupleDataset(
        rng.randn(N_EXAMPLES, 4).astype(numpy.float32),
        rng.randint(0, 3, N_EXAMPLES).astype(numpy.int32))


def train(out, recipe, stop, optimizer_wrapper=None, resume=None,
          snapshot=None):
    """A tiny Trainer run with the recipe; returns (model, per-iteration log).
    """
    numpy.random.seed(0)
    model = L.Classifier(Net())
    optimizer = recipes.create_optimizer(recipe)
    if optimizer_wrapper is not None:
        optimizer = optimizer_wrapper(optimizer)
    optimizer.setup(model)
    recipes.add_hooks(optimizer, recipe)
    iterator = chainer.iterators.SerialIterator(dataset(), BATCH,
                                                shuffle=False)
    trainer = training.Trainer(training.StandardUpdater(iterator, optimizer),
                               (stop, 'iteration'), out=out)
    assert extensions.add_schedules(
        trainer, recipes.hyperparameter_schedules(recipe, BATCH),
        optimizer) == [
        'lr', 'alpha_sgd', 'alpha_rmsprop']
    log = chainer_extensions.LogReport(trigger=(1, 'iteration'),
                                       filename=None)
    trainer.extend(log)
    if resume:
        chainer.serializers.load_npz(resume, trainer)
    trainer.run()
    if snapshot:
        chainer.serializers.save_npz(snapshot, trainer)
    return model, log.log


def check_logged_values(recipe, log):
    """Entry k holds the values used by update k, at epoch (k-1) B / N."""
    s = recipes.hyperparameter_schedules(recipe, BATCH)
    for entry in log:
        epoch = (entry['iteration'] - 1) * BATCH / N_EXAMPLES
        for key in ('lr', 'alpha_sgd', 'alpha_rmsprop'):
            assert entry[key] == pytest.approx(s[key](epoch), rel=1e-12), (
                entry, key)


def test_resume_mid_warmup_continues_exactly(tmp_path):
    # Warm-up laid out for 2 epochs: centre 0.222, fully SGD at 0.278
    # (iteration 11.1); the run is interrupted inside the linear branch.
    recipe = make_recipe('--epoch', str(EPOCHS), '--scale-schedule')
    assert 0.5 < schedules.alpha_sgd(9 * BATCH / N_EXAMPLES,
                                     10 * EPOCHS / 90, 5 * EPOCHS / 90) < 1
    whole, whole_log = train(str(tmp_path / 'a'), recipe, 14)
    check_logged_values(recipe, whole_log)
    snapshot = str(tmp_path / 'snapshot')
    train(str(tmp_path / 'b'), recipe, 9, snapshot=snapshot)
    resumed, resumed_log = train(str(tmp_path / 'c'), recipe, 14,
                                 resume=snapshot)
    assert [e['iteration'] for e in resumed_log][-5:] == list(range(10, 15))
    check_logged_values(recipe, resumed_log)
    for (name, p), (_, q) in zip(sorted(whole.namedparams()),
                                 sorted(resumed.namedparams())):
        numpy.testing.assert_array_equal(p.array, q.array, err_msg=name)


class LocalCommunicator(object):
    """One-process stand-in for a ChainerMN communicator."""

    def bcast_data(self, model):
        pass

    def multi_node_mean_grad(self, model, zero_fill=False):
        pass


def test_schedule_reaches_the_optimizer_inside_chainermn_wrapper(tmp_path):
    recipe = make_recipe('--epoch', str(EPOCHS), '--scale-schedule')

    def wrap(optimizer):
        wrap.actual = optimizer
        return chainermn.create_multi_node_optimizer(optimizer,
                                                     LocalCommunicator())

    _, log = train(str(tmp_path), recipe, 10, optimizer_wrapper=wrap)
    check_logged_values(recipe, log)
    s = recipes.hyperparameter_schedules(recipe, BATCH)
    epoch = 10 * BATCH / N_EXAMPLES   # set for the 11th update
    rule = next(iter(wrap.actual.target.params())).update_rule
    for key in ('lr', 'alpha_sgd', 'alpha_rmsprop'):
        assert getattr(wrap.actual, key) == pytest.approx(s[key](epoch))
        assert getattr(rule.hyperparam, key) == pytest.approx(s[key](epoch))


def test_two_process_akiba2017_logs_the_scheduled_values(mpirun, tmp_path):
    out = str(tmp_path / 'out')
    proc = mpirun(2, ['train_imagenet.py', '--demo', '--test',
                      '--recipe', 'akiba2017', '--iterations', '3',
                      '--batchsize', '4', '--val_batchsize', '16',
                      '--loaderjob', '0', '--epoch', '1', '--scale-schedule',
                      '--out', out])
    n_train = int(re.search(r'training images: (\d+)', proc.stdout).group(1))
    with open(os.path.join(out, 'log')) as f:
        log = json.load(f)
    assert [e['iteration'] for e in log] == [1, 2, 3]
    s = recipes.hyperparameter_schedules(
        make_recipe('--epoch', '1', '--scale-schedule'), 8)
    for entry in log:
        epoch = (entry['iteration'] - 1) * 8 / n_train
        for key in ('lr', 'alpha_sgd', 'alpha_rmsprop'):
            assert entry[key] == pytest.approx(s[key](epoch), rel=1e-12), (
                entry, key)
    assert log[1]['alpha_sgd'] > log[0]['alpha_sgd']


@pytest.mark.parametrize('order', ['C', 'F'])
def test_weight_decay_matches_chainer_hook_on_large_params(order):
    """The in-place decay adds ``rate * theta`` as Chainer's hook does, bit
    for bit: in the C loop (C order) and on NumPy blocks (F order)."""
    theta = numpy.random.RandomState(4).randn(401, 733).astype(numpy.float32)
    grads = {}
    for name, hook in (('ours', WeightDecay(0.01)),
                       ('chainer',
                        chainer.optimizer_hooks.WeightDecay(0.01))):
        param = chainer.Parameter(theta.copy())
        param.grad = numpy.asarray(numpy.random.RandomState(5).randn(
            *theta.shape).astype(numpy.float32), order=order)
        hook(None, param)
        grads[name] = param.grad
    numpy.testing.assert_array_equal(grads['ours'], grads['chainer'])

"""benchmarks.train_step: it runs, and its PyTorch step does the Chainer
update."""
import chainer
import numpy
import pytest

from benchmarks import step_profile
from benchmarks import train_step
from optimizers import recipes


class _Net(chainer.Chain):
    """A linear layer and a normalization scale, with Chainer's names."""

    def __init__(self, W, b, gamma):
        super(_Net, self).__init__()
        with self.init_scope():
            self.fc = chainer.links.Linear(W.shape[1], W.shape[0],
                                           initialW=W, initial_bias=b)
            self.bn = chainer.links.BatchNormalization(len(gamma))
        self.bn.gamma.array[...] = gamma


@pytest.mark.parametrize('recipe', ['akiba2017', 'goyal2017', 'sgd'])
@pytest.mark.parametrize('epoch', [0.0, 11.0])
def test_torch_update_matches_the_chainer_optimizer(recipe, epoch):
    torch = pytest.importorskip('torch')
    recipe = train_step.parse_args(['--recipe', recipe]).recipe
    rng = numpy.random.RandomState(0)
    W, gW = rng.standard_normal((2, 3, 4)).astype(numpy.float32)
    b, gb, gamma, ggamma = rng.standard_normal((4, 3)).astype(numpy.float32)

    net = _Net(W, b, gamma)
    optimizer = recipes.create_optimizer(recipe)
    for attr, schedule in recipes.hyperparameter_schedules(
            recipe, 8192).items():
        setattr(optimizer, attr, schedule(epoch))
    optimizer.setup(net)
    recipes.add_hooks(optimizer, recipe)

    model = torch.nn.Sequential(torch.nn.Linear(4, 3),
                                torch.nn.BatchNorm2d(3))
    fc, bn = model
    with torch.no_grad():
        fc.weight.copy_(torch.from_numpy(W))
        fc.bias.copy_(torch.from_numpy(b))
        bn.weight.copy_(torch.from_numpy(gamma))
    update = train_step.torch_update(model, optimizer, recipe)
    for _ in range(2):  # the second step sees the momentum buffers
        net.cleargrads()
        net.fc.W.grad, net.fc.b.grad = gW.copy(), gb.copy()
        net.bn.gamma.grad, net.bn.beta.grad = ggamma.copy(), gb.copy()
        optimizer.update()
        fc.weight.grad, fc.bias.grad = (torch.from_numpy(gW.copy()),
                                        torch.from_numpy(gb.copy()))
        bn.weight.grad, bn.bias.grad = (torch.from_numpy(ggamma.copy()),
                                        torch.from_numpy(gb.copy()))
        with torch.no_grad():
            update()
    for theirs, ours in ((fc.weight, net.fc.W), (fc.bias, net.fc.b),
                         (bn.weight, net.bn.gamma), (bn.bias, net.bn.beta)):
        numpy.testing.assert_allclose(theirs.detach().numpy(), ours.array,
                                      rtol=1e-5, atol=1e-6)


def test_runs_and_prints_its_figures(capsys, monkeypatch):
    monkeypatch.setattr(train_step, 'PEAK_N', 256)
    monkeypatch.setattr(train_step, 'TRANSFORM_REPEATS', 5)
    train_step.main(['--sizes', '32', '--batchsize', '2', '--steps', '1',
                     '--rounds', '1', '--stock', '--unfused',
                     '--blas-threads', '--no-torch', '--transform',
                     '--profile'])
    out = capsys.readouterr().out
    assert 'GEMM peak' in out and 'of peak' in out
    assert 'chainer / chainer-stock' in out
    assert 'chainer / chainer-unfused' in out
    assert 'chainer / chainer-blas' in out
    assert 'pytorch' not in out
    assert 'training transform, 32 px crop' in out
    assert 'profile, chainer, mean of 1 steps' in out
    for kind in step_profile.KINDS:
        assert '    {} '.format(kind) in out


def test_times_pytorch_in_both_memory_formats(capsys, monkeypatch):
    pytest.importorskip('torch')
    monkeypatch.setattr(train_step, 'PEAK_N', 256)
    train_step.main(['--sizes', '32', '--batchsize', '2', '--steps', '1',
                     '--rounds', '2'])
    lines = capsys.readouterr().out.splitlines()
    for row in ('pytorch ', 'pytorch-cl ', 'chainer / pytorch ',
                'chainer / pytorch-cl ', 'chainer / pytorch-best '):
        assert sum(line.lstrip().startswith(row) for line in lines) == 1


def test_torch_step_keeps_the_memory_format():
    torch = pytest.importorskip('torch')
    recipe = train_step.parse_args([]).recipe
    _, _, optimizer = train_step.chainer_step(32, 2, recipe)
    calls = []
    original = torch.nn.functional.conv2d

    def conv2d(x, weight, *args, **kwargs):
        calls.append(x.is_contiguous(memory_format=torch.channels_last)
                     and weight.is_contiguous(
                         memory_format=torch.channels_last))
        return original(x, weight, *args, **kwargs)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(torch.nn.functional, 'conv2d', conv2d)
        train_step.torch_step(32, 2, optimizer, recipe,
                              memory_format=torch.channels_last)
    assert calls and all(calls)


def _times():
    """Seconds per step, two rounds, of three implementations."""
    return {'chainer': [[1.0, 2.0], [4.0]],
            'pytorch': [[3.0], [5.0, 7.0]],
            'pytorch-cl': [[2.0, 2.5], [3.0]]}


def test_rates_are_images_per_second_of_the_median_round_and_best():
    median, per_round, best = train_step.rates(_times(), 8)
    assert median['chainer'] == 8 / numpy.median([1.0, 2.0, 4.0])
    assert per_round['pytorch'] == [8 / 3.0, 8 / numpy.median([5.0, 7.0])]
    assert best['pytorch-cl'] == 8 / 2.0


def test_the_best_pytorch_is_the_faster_layout_of_the_run():
    median, per_round, best = train_step.rates(_times(), 8)
    fastest = train_step.faster(median, ('pytorch', 'pytorch-cl'))
    assert fastest == 'pytorch-cl'
    line = train_step.ratio_line('chainer', fastest, median, per_round,
                                 best, label='pytorch-best')
    name, ratio, rest = line.split(None, 4)[2:]
    assert name == 'pytorch-best'
    assert float(ratio) == pytest.approx(
        numpy.median([2.0, 2.5, 3.0]) / numpy.median([1.0, 2.0, 4.0]),
        abs=0.005)
    assert rest.startswith('(pytorch-cl; per round {:.2f} {:.2f}; '.format(
        2.25 / 1.5, 3.0 / 4.0))
    assert rest.endswith('best steps {:.2f})'.format(2.0 / 1.0))

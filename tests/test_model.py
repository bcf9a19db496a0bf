import chainer
import chainer.links as L
import numpy
import pytest

from models import ResNet50


def test_parameter_count_matches_resnet50():
    model = ResNet50()
    assert sum(p.size for p in model.params()) == 25557032


def test_no_convolution_has_a_bias():
    model = ResNet50(n_class=10)
    convs = [l for l in model.links() if isinstance(l, L.Convolution2D)]
    assert len(convs) == 53
    assert all(c.b is None for c in convs)


@pytest.mark.parametrize('side', [224, 32, 45])
def test_output_shape(side):
    model = ResNet50(n_class=7)
    x = numpy.zeros((2, 3, side, side), numpy.float32)
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        assert model(x).shape == (2, 7)


def test_rejects_inputs_smaller_than_32():
    with pytest.raises(ValueError, match='at least 32x32'):
        ResNet50(n_class=2)(numpy.zeros((1, 3, 31, 31), numpy.float32))


def test_deterministic_under_a_seed():
    def init(seed):
        numpy.random.seed(seed)
        return [p.array.copy() for p in ResNet50(n_class=5).params()]
    a, b, c = init(3), init(3), init(4)
    assert all((x == y).all() for x, y in zip(a, b))
    assert not all((x == y).all() for x, y in zip(a, c))


def test_zero_init_residual_zeroes_last_gamma_of_each_block():
    model = ResNet50(n_class=3, zero_init_residual=True)
    blocks = [b for res in (model.res2, model.res3, model.res4, model.res5)
              for b in res]
    assert len(blocks) == 16
    assert all((b.bn3.gamma.array == 0).all() for b in blocks)
    assert (blocks[0].bn1.gamma.array == 1).all()

import chainer
import numpy
import pytest

import errors
import datasets
from models import ResNet50
import train_imagenet


def test_width_one_is_the_papers_resnet50():
    assert sum(p.size for p in ResNet50(width=1.0).params()) == 25557032


def test_width_scales_every_channel_count():
    full, eighth = ResNet50(n_class=10), ResNet50(n_class=10, width=0.125)
    assert eighth.conv1.W.shape[0] == 8
    assert eighth.fc.W.shape == (10, 256)
    for (name, a), (_, b) in zip(sorted(full.namedparams()),
                                 sorted(eighth.namedparams())):
        if a.ndim == 4:  # convolution kernels: out and in channels scale
            assert b.shape[0] * 8 == a.shape[0], name
            assert b.shape[1] * 8 == a.shape[1] or b.shape[1] == 3, name


def test_narrow_model_runs_on_32_pixels():
    model = ResNet50(n_class=10, width=0.125)
    x = numpy.zeros((2, 3, 32, 32), numpy.float32)
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        assert model(x).shape == (2, 10)


def test_rejects_a_non_positive_width():
    with pytest.raises(ValueError, match='width must be positive'):
        ResNet50(width=0)


def test_width_flag_reaches_the_model():
    args = train_imagenet.parse_args(['--demo', '--width', '0.25'])
    model = train_imagenet.build_model(args, 10)
    assert model.predictor.conv1.W.shape[0] == 16


def test_width_flag_rejects_zero():
    with pytest.raises(errors.InputError, match='--width must be positive'):
        train_imagenet.parse_args(['--demo', '--width', '0'])

"""A full-width 1000-class model of this trainer loads into Chainer's
ResNet50Layers and back, and ResNet50Layers' arrays (its conv1 bias
folded) start one, computing the same logits."""
import io
import zipfile

import chainer
import numpy
import pytest

from largebatch.errors import InputError
import models
from models import chainer_resnet50


@pytest.fixture(scope='module')
def pair():
    numpy.random.seed(0)
    ours = models.ResNet50(1000)
    for link in ours.links():
        if isinstance(link, chainer.links.BatchNormalization):
            shape = link.avg_mean.shape
            link.avg_mean[...] = numpy.random.uniform(-.1, .1, shape)
            link.avg_var[...] = numpy.random.uniform(.5, 2, shape)
    theirs = chainer.links.ResNet50Layers(pretrained_model=None)
    x = numpy.random.RandomState(1).uniform(
        -1, 1, (2, 3, 224, 224)).astype(numpy.float32)
    return ours, theirs, x


def assert_close(a, b):
    """Float32 sums in another order: within 1e-5 of the largest logit (a
    random network's reach hundreds)."""
    assert numpy.abs(a - b).max() <= 1e-5 * numpy.abs(b).max()


def logits(ours, theirs, x):
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        return ours(x).array, theirs(x, layers=['fc6'])['fc6'].array


def test_a_model_of_this_trainer_loads_into_resnet50_layers(pair):
    ours, theirs, x = pair
    chainer_resnet50.to_resnet50_layers(ours, theirs)
    mine, chainers = logits(ours, theirs, x)
    assert_close(chainers, mine)


def test_resnet50_layers_start_a_model_with_conv1s_bias_folded(pair,
                                                               tmp_path):
    ours, theirs, x = pair
    theirs.conv1.b.array[...] = numpy.random.RandomState(2).uniform(
        -.5, .5, theirs.conv1.b.shape)
    path = str(tmp_path / 'ResNet-50-model.npz')
    chainer.serializers.save_npz(path, theirs)
    loaded, metadata = models.saved_model.load(path)
    assert metadata == {'arch': 'resnet50', 'width': 1.0, 'n_class': 1000}
    mine, chainers = logits(loaded, theirs, x)
    assert_close(mine, chainers)
    assert chainer_resnet50.chainer_name('/res3/2/bn1/gamma') == \
        'res3/b2/bn1/gamma'


def test_an_array_of_another_shape_is_refused_from_its_header(pair,
                                                              tmp_path):
    _, theirs, _ = pair
    saved = str(tmp_path / 'saved.npz')
    chainer.serializers.save_npz(saved, theirs, compression=False)
    path = str(tmp_path / 'ResNet-50-model.npz')
    other = io.BytesIO()
    numpy.save(other, numpy.zeros((3, 3), numpy.float32))
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, 'w') as out:
        for info in source.infolist():
            out.writestr(info.filename, other.getvalue()
                         if info.filename == 'res2/a/conv2/W.npy'
                         else source.read(info))
    with pytest.raises(InputError) as e:
        models.saved_model.load(path)
    assert str(e.value) == (
        '{}: not a ResNet50Layers model (res2/a/conv2/W has shape (3, 3), '
        'ResNet-50 (64, 64, 3, 3))'.format(path))

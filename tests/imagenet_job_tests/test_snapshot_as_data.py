"""A snapshot is data: objects, other shapes and impossible counts are one
line naming the file and the value; nothing in it runs."""
import os

import chainer
import numpy
import pytest

from largebatch.errors import InputError
from imagenet_job import resume
from imagenet_job import snapshots


class Holder(chainer.Chain):
    """A parameter, a counter and a rate, as a trainer holds them."""

    def __init__(self):
        super(Holder, self).__init__()
        with self.init_scope():
            self.W = chainer.Parameter(numpy.zeros((2, 3), numpy.float32))
        self.iteration = 0
        self.rate = 0.5

    def serialize(self, serializer):
        super(Holder, self).serialize(serializer)
        self.iteration = serializer('iteration', self.iteration)
        self.rate = serializer('rate', self.rate)


class RunsCode(object):
    """Unpickling it creates ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, 'w'))


def archive(tmp_path, **replace):
    saved = Holder()
    saved.W.array[...] = 7
    saved.iteration = 12
    path = str(tmp_path / 'snapshot_iter_12')
    chainer.serializers.save_npz(path, saved)
    with numpy.load(path) as npz:
        entries = dict(npz)
    entries.update(replace)
    with open(path, 'wb') as f:
        numpy.savez(f, **entries)
    return path


def load(path, target):
    resume.Snapshot.read(path).load_into(target)


def test_a_snapshot_loads_its_values(tmp_path):
    holder = Holder()
    load(archive(tmp_path), holder)
    assert holder.iteration == 12 and (holder.W.array == 7).all()


def test_pickled_objects_are_never_loaded(tmp_path):
    marker = str(tmp_path / 'ran')
    path = archive(tmp_path, iteration=numpy.array(RunsCode(marker),
                                                   dtype=object))
    with pytest.raises(InputError, match=r'^{}: iteration holds Python '
                       r'objects, which are never loaded$'.format(path)):
        load(path, Holder())
    assert not os.path.exists(marker)


@pytest.mark.parametrize('replace, message', [
    ({'W': numpy.zeros((3, 3), numpy.float32)},
     'W has shape (3, 3), the trainer holds (2, 3)'),
    ({'iteration': numpy.array(-7)},
     'iteration is -7, expected a count'),
    ({'rate': numpy.array(numpy.inf)}, 'rate is inf, expected a finite'),
    ({'W': numpy.zeros((2, 3), 'U1')}, 'W is of dtype <U1, the trainer'),
])
def test_impossible_values_are_one_line(tmp_path, replace, message):
    path = archive(tmp_path, **replace)
    before = open(path, 'rb').read()
    with pytest.raises(InputError) as e:
        load(path, Holder())
    assert str(e.value).startswith('{}: {}'.format(path, message))
    assert '\n' not in str(e.value)
    assert open(path, 'rb').read() == before


def test_a_snapshot_older_than_a_configuration_key_loads(tmp_path):
    path = str(tmp_path / 'old')
    numpy.savez(path, arch=numpy.array('resnet50'))
    config = snapshots.RunConfiguration(arch='resnet50', bn_variance='union')
    load(path + '.npz', config)
    assert config.config == {'arch': 'resnet50', 'bn_variance': 'union'}
    with pytest.raises(InputError, match='the snapshot holds no W'):
        load(path + '.npz', Holder())

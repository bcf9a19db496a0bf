"""image_data.in_memory: images decoded once give the same examples as the
files, through the same crop, flip and normalization."""
import io
import os
import zipfile

import numpy
import pytest
from PIL import Image

from image_data import in_memory
from image_data import transforms
from largebatch.errors import InputError

SIDE = transforms.resize_for(32)


@pytest.fixture
def folders(tmp_path):
    """Two classes of 28 px JPEGs, like the Fashion-MNIST demo."""
    rng = numpy.random.default_rng(0)
    for label, name in enumerate(['a_first', 'b_second']):
        (tmp_path / name).mkdir()
        for i in range(3):
            pixels = rng.integers(0, 256, (28, 28), dtype=numpy.uint8)
            Image.fromarray(pixels).convert('RGB').save(
                str(tmp_path / name / '{}.jpg'.format(i)))
    return tmp_path


def test_packed_examples_match_the_files(folders, tmp_path):
    out = str(tmp_path / 'set.npz')
    assert in_memory.pack(str(folders), out, SIDE) == 6
    dataset = in_memory.load(out, SIDE)
    files, class_names = in_memory.image_list.read_class_folders(
        str(folders))
    assert dataset.class_names == class_names == ['a_first', 'b_second']
    assert list(dataset.labels) == [0, 0, 0, 1, 1, 1]
    mean = transforms.IMAGENET_MEAN
    # The .npz holds whole resized images, as resize_whole_image decodes.
    train = transforms.TrainTransform(32, mean, resize_whole_image=True)
    val = transforms.ValTransform(32, mean, resize_whole_image=True)
    for i in range(len(dataset)):
        for seed in range(4):  # crops and flips of both kinds
            x, t = train(files[i], numpy.random.default_rng([seed, i]))
            y, u = train(dataset[i], numpy.random.default_rng([seed, i]))
            numpy.testing.assert_array_equal(x, y)
            assert t == u
        numpy.testing.assert_array_equal(val(files[i])[0],
                                         val(dataset[i])[0])


def test_slices_are_datasets_of_the_same_images(folders, tmp_path):
    out = str(tmp_path / 'set.npz')
    in_memory.pack(str(folders), out, SIDE)
    dataset = in_memory.load(out, SIDE)
    part = dataset[2:5]
    assert len(part) == 3 and list(part.labels) == [0, 1, 1]
    numpy.testing.assert_array_equal(part[0][0], dataset[2][0])


def test_another_crop_size_is_refused_with_the_side_it_needs(folders,
                                                             tmp_path):
    out = str(tmp_path / 'set.npz')
    in_memory.pack(str(folders), out, SIDE)
    with pytest.raises(InputError, match=r'37x37 px, this crop size needs '
                                         r'73'):
        in_memory.load(out, 73)


IMAGES = numpy.zeros((2, 5, 5, 3), numpy.uint8)


@pytest.mark.parametrize('content, expected', [
    (b'not a zip', 'not an .npz (no zip archive), as python -m '
     'image_data.in_memory writes'),
    (dict(images=IMAGES[..., 0], labels=numpy.zeros(2, int)),
     'expected uint8 images (N, side, side, 3) and N integer labels, N > 0, '
     'got uint8 (2, 5, 5) and int64 (2,) labels'),
    (dict(images=IMAGES, labels=numpy.array([1.7, 0.])),
     'expected uint8 images (N, side, side, 3) and N integer labels, N > 0, '
     'got uint8 (2, 5, 5, 3) and float64 (2,) labels'),
    (dict(images=IMAGES, labels=numpy.array(['a', 'b'])),
     'expected uint8 images (N, side, side, 3) and N integer labels, N > 0, '
     'got uint8 (2, 5, 5, 3) and <U1 (2,) labels'),
    (dict(images=IMAGES, labels=numpy.zeros((2, 1), int)),
     'expected uint8 images (N, side, side, 3) and N integer labels, N > 0, '
     'got uint8 (2, 5, 5, 3) and int64 (2, 1) labels'),
    (dict(images=IMAGES[:0], labels=numpy.zeros(0, int)),
     'expected uint8 images (N, side, side, 3) and N integer labels, N > 0, '
     'got uint8 (0, 5, 5, 3) and int64 (0,) labels'),
    (dict(images=IMAGES, labels=numpy.array([0, 2 ** 32])),
     'label 4294967296 of image 1 is not a class index'),
    (dict(images=IMAGES, labels=numpy.zeros(2, int),
          class_names=numpy.array(3)),
     'class_names is not a list of names'),
])
def test_a_file_that_is_not_a_packed_set_is_one_line(tmp_path, content,
                                                     expected):
    path = tmp_path / 'bad.npz'
    if isinstance(content, dict):
        numpy.savez(str(path), **content)
    else:
        path.write_bytes(content)
    with pytest.raises(InputError) as e:
        in_memory.load(str(path), 5)
    assert str(e.value) == 'dataset {}: {}'.format(path, expected)


def write(path, labels, class_names):
    numpy.savez(str(path), images=numpy.zeros((len(labels), 5, 5, 3),
                                              numpy.uint8),
                labels=numpy.array(labels), class_names=class_names)
    return str(path)


def test_read_datasets_counts_classes_and_checks_labels(tmp_path):
    train = write(tmp_path / 'train.npz', [0, 1, 2], ['a', 'b', 'c'])
    val = write(tmp_path / 'val.npz', [2, 0], ['a', 'b', 'c'])
    train_set, val_set, n_class = in_memory.read_datasets(train, val, 5)
    assert (len(train_set), len(val_set), n_class) == (3, 2, 3)
    assert in_memory.read_datasets(train, val, 5, n_class=7)[2] == 7
    with pytest.raises(InputError, match=r'train.npz: label 2 of image 2 '
                                         r'is out of range \[0, 2\)'):
        in_memory.read_datasets(train, val, 5, n_class=2)


def test_read_datasets_refuses_mixed_layouts_and_other_classes(tmp_path):
    train = write(tmp_path / 'train.npz', [0, 1], ['a', 'b'])
    other = write(tmp_path / 'other.npz', [0, 1], ['a', 'z'])
    with pytest.raises(InputError, match='must be an .npz too'):
        in_memory.read_datasets(train, str(tmp_path), 5)
    with pytest.raises(InputError, match='other.npz: its class names'):
        in_memory.read_datasets(train, other, 5)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(InputError, match='none.npz: no such file'):
        in_memory.load(str(tmp_path / 'none.npz'), SIDE)


def test_an_existing_set_is_replaced_only_with_force(folders, tmp_path,
                                                     capsys):
    out = tmp_path / 'set.npz'
    out.write_bytes(b'mine')
    with pytest.raises(SystemExit) as info:
        in_memory.main([str(folders), str(out)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (
        'in_memory: {} exists already; --force replaces it\n'.format(out))
    assert out.read_bytes() == b'mine'
    in_memory.main([str(folders), str(out), '--force'])
    assert len(in_memory.load(str(out), SIDE)) == 6
    assert sorted(os.listdir(str(tmp_path))) == sorted(
        ['a_first', 'b_second', 'set.npz'])


def test_a_set_whose_header_misdescribes_its_images_is_one_line(tmp_path):
    """The members' headers are read before any payload: images that
    declare a million 64 px images in a few bytes are refused, named."""
    path = str(tmp_path / 'train.npz')
    header = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(header, {
        'shape': (1 << 20, 64, 64, 3), 'fortran_order': False,
        'descr': '|u1'})
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('images.npy', header.getvalue() + b'\0' * 64)
        labels = io.BytesIO()
        numpy.save(labels, numpy.zeros(1 << 20, numpy.int32))
        archive.writestr('labels.npy', labels.getvalue())
    with pytest.raises(InputError) as e:
        in_memory.load(path, 64)
    assert str(e.value).startswith('dataset {}: images'.format(path))
    assert '\n' not in str(e.value)

import os

import numpy
import pytest
from PIL import Image

from largebatch import errors
import image_data
from image_data import demo


def write_image(path, size=(40, 30), mode='RGB', color=100):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new(mode, size, color).save(path)


@pytest.fixture
def folders(tmp_path):
    for cls in ('b_cat', 'a_dog', 'c_eel'):
        for i in range(3):
            write_image(str(tmp_path / 'train' / cls / '{}.jpg'.format(i)))
    return tmp_path / 'train'


def test_class_folders_label_sorted_folder_names(folders):
    pairs, names = image_data.read_class_folders(str(folders))
    assert names == ['a_dog', 'b_cat', 'c_eel']
    assert len(pairs) == 9
    for path, label in pairs:
        assert os.path.basename(os.path.dirname(path)) == names[label]


def test_validation_folders_reuse_training_labels(folders, tmp_path):
    write_image(str(tmp_path / 'val' / 'c_eel' / 'x.jpg'))
    _, names = image_data.read_class_folders(str(folders))
    pairs, _ = image_data.read_class_folders(str(tmp_path / 'val'), names)
    assert list(pairs) == [(str(tmp_path / 'val' / 'c_eel' / 'x.jpg'), 2)]


def test_list_file_is_relative_to_root(folders, tmp_path):
    listing = tmp_path / 'train.txt'
    listing.write_text('a_dog/0.jpg 0\n\nc_eel/2.jpg 2\n')
    pairs = image_data.read_list_file(str(listing), str(folders))
    assert list(pairs) == [(os.path.join(str(folders), 'a_dog/0.jpg'), 0),
                           (os.path.join(str(folders), 'c_eel/2.jpg'), 2)]


def test_embedded_demo_dataset_is_class_balanced():
    train, names = image_data.read_class_folders(demo.TRAIN_DIR)
    val, _ = image_data.read_class_folders(demo.VAL_DIR, names)
    assert names == demo.CLASS_NAMES
    assert numpy.bincount([l for _, l in train]).tolist() == [300] * 10
    assert numpy.bincount([l for _, l in val]).tolist() == [100] * 10


def listing(tmp_path, text, name='train.txt'):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize('text,message', [
    ('a_dog/0.jpg 0\na_dog/1.jpg\n',
     r'train\.txt:2: expected "<image path> <integer label>", got '
     r"'a_dog/1\.jpg'"),
    ('a_dog/0.jpg zero\n', r"train\.txt:1: label 'zero' is not an integer"),
    ('a_dog/0.jpg 4294967296\n',
     r'train\.txt:1: label 4294967296 does not fit in 32 bits'),
    ('a_dog/0.jpg 0\n\nmissing.jpg 1\n',
     r'train\.txt:3: image .*missing\.jpg does not exist \(root '),
    ('\n\n', r'list file .*train\.txt: no images listed'),
])
def test_bad_list_file_is_one_line_naming_file_and_line(
        folders, tmp_path, text, message):
    with pytest.raises(errors.InputError, match=message) as e:
        image_data.read_list_file(listing(tmp_path, text), str(folders))
    assert '\n' not in str(e.value)


def test_missing_list_file_and_folder_are_named(tmp_path):
    with pytest.raises(errors.InputError, match='nope.txt: no such file'):
        image_data.read_list_file(str(tmp_path / 'nope.txt'))
    with pytest.raises(errors.InputError, match='nope: no such directory'):
        image_data.read_class_folders(str(tmp_path / 'nope'))


def test_validation_folder_with_an_unknown_class_is_refused(folders,
                                                            tmp_path):
    write_image(str(tmp_path / 'val' / 'zebra' / 'x.jpg'))
    with pytest.raises(errors.InputError,
                       match='class folder zebra is not among the training'):
        image_data.read_class_folders(str(tmp_path / 'val'), ['a_dog'])


def test_label_out_of_range_names_the_source_and_the_image(folders, tmp_path):
    index = image_data.read_list_file(
        listing(tmp_path, 'a_dog/0.jpg 1\nc_eel/2.jpg 3\n'), str(folders))
    image_data.check_labels(index, 4, 'train.txt')
    with pytest.raises(errors.InputError,
                       match=r'train\.txt: label 3 of .*c_eel/2\.jpg is out '
                             r'of range \[0, 3\)'):
        image_data.check_labels(index, 3, 'train.txt')
    negative = image_data.read_list_file(
        listing(tmp_path, 'a_dog/0.jpg -1\n'), str(folders))
    with pytest.raises(errors.InputError, match='label -1 of'):
        image_data.check_labels(negative, 3, 'train.txt')


def test_read_datasets_gives_class_folder_labels_to_validation(folders,
                                                               tmp_path):
    write_image(str(tmp_path / 'val' / 'b_cat' / 'x.jpg'))
    train, val, n_class = image_data.read_datasets(str(folders),
                                                   str(tmp_path / 'val'))
    assert (len(train), n_class) == (9, 3)
    assert list(val) == [(str(tmp_path / 'val' / 'b_cat' / 'x.jpg'), 1)]


def test_read_datasets_checks_list_file_labels_against_n_class(folders,
                                                               tmp_path):
    train = listing(tmp_path, 'a_dog/0.jpg 0\n')
    val = listing(tmp_path, 'b_cat/1.jpg 5\n', 'val.txt')
    # the largest label of either list + 1, unless --n-class says more
    assert image_data.read_datasets(train, val, str(folders))[2] == 6
    assert image_data.read_datasets(train, val, str(folders), 1000)[2] == 1000
    with pytest.raises(errors.InputError,
                       match=r'val\.txt: label 5 .* out of range \[0, 5\)'):
        image_data.read_datasets(train, val, str(folders), n_class=5)

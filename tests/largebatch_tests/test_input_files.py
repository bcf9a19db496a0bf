"""largebatch.input_files: a file a user names is a regular file, checked
before anything opens it, at every reader of the project."""
import os

import pytest

from image_data import image_list
from image_data import in_memory
from image_data import index_file
from image_data import transforms
from largebatch import input_files
from largebatch.errors import InputError
import models


@pytest.fixture
def places(tmp_path):
    regular = tmp_path / 'regular'
    regular.write_bytes(b'x')
    (tmp_path / 'link').symlink_to(regular)
    (tmp_path / 'broken').symlink_to(tmp_path / 'gone')
    (tmp_path / 'folder').mkdir()
    os.mkfifo(str(tmp_path / 'fifo'))
    return tmp_path


@pytest.mark.parametrize('name, says', [
    ('missing', 'no such file'), ('broken', 'no such file'),
    ('folder', 'a directory, not a regular file'),
    ('fifo', 'a FIFO, not a regular file')])
def test_what_is_no_regular_file_is_named(places, name, says):
    path = str(places / name)
    with pytest.raises(InputError) as e:
        input_files.check_regular(path, 'list file')
    assert str(e.value) == 'list file {}: {}'.format(path, says)


def test_a_regular_file_or_a_link_to_one_passes(places):
    input_files.check_regular(str(places / 'regular'))
    input_files.check_regular(str(places / 'link'))


def test_a_device_is_named():
    with pytest.raises(InputError, match='^/dev/null: a character device, '
                       'not a regular file$'):
        input_files.check_regular('/dev/null')


@pytest.mark.parametrize('read, prefix', [
    (models.saved_model.load, ''),
    (lambda path: transforms.load_mean(path, 256), ''),
    (lambda path: in_memory.load(path, 36), 'dataset '),
    (image_list.read_list_file, 'list file '),
    (index_file.read_header, 'index ')])
def test_every_reader_refuses_a_fifo_without_blocking(places, read, prefix):
    fifo = str(places / 'fifo')
    with pytest.raises(InputError) as e:
        read(fifo)
    assert str(e.value) == '{}{}: a FIFO, not a regular file'.format(
        prefix, fifo)

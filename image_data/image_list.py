"""The ImageNet layouts: Chainer's list file, class folders, and an index of
the images in an archive (:mod:`image_data.index_file`).

Each gives an :class:`~image_data.image_index.ImageIndex` of ``(path, label)``
pairs; every path is checked to exist up front so that a typo fails before
any training time is spent. One process reads; see ``image_data.broadcast``.
"""
import os

import numpy

from image_data import index_file
from image_data.image_index import ImageIndex
from largebatch import input_files
from largebatch.errors import InputError

IMAGE_EXTENSIONS = ('.jpeg', '.jpg', '.png', '.bmp', '.ppm', '.gif', '.tif',
                    '.tiff', '.webp')
_INT32 = numpy.iinfo(numpy.int32)


def read_list_file(path, root='.'):
    """The ``relative/path.JPEG label`` lines of ``path``; paths are
    relative to ``root``."""
    input_files.check_regular(path, 'list file')
    with open(path, 'rb') as f:
        index = ImageIndex(root, _list_entries(_text_lines(f, path), path,
                                               root))
    if not len(index):
        raise InputError('list file {}: no images listed'.format(path))
    return index


def _text_lines(lines, path):
    """The UTF-8 ``lines`` of the file at ``path``, decoded."""
    for lineno, line in enumerate(lines, 1):
        try:
            yield line.decode('utf-8')
        except UnicodeDecodeError as e:
            raise InputError('{}:{}: not UTF-8 text (byte {:#04x} at column '
                             '{})'.format(path, lineno, line[e.start],
                                          e.start + 1))


def _list_entries(lines, path, root):
    for lineno, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise InputError(
                '{}:{}: expected "<image path> <integer label>", got {!r}'
                .format(path, lineno, line.rstrip('\n')))
        try:
            label = int(fields[1])
        except ValueError:
            raise InputError('{}:{}: label {!r} is not an integer'.format(
                path, lineno, fields[1]))
        if not _INT32.min <= label <= _INT32.max:
            raise InputError('{}:{}: label {} does not fit in 32 bits'.format(
                path, lineno, label))
        image = os.path.join(root, fields[0])
        if not os.path.isfile(image):
            raise InputError('{}:{}: image {} does not exist (root {})'
                             .format(path, lineno, image, root))
        yield fields[0], label


def read_class_folders(path, class_names=None):
    """``path/<class>/*.JPEG`` with labels = the sorted class folder names.

    ``class_names`` (those of the training set) fixes the label order, so a
    validation folder with the same classes gets the same labels.
    """
    if not os.path.isdir(path):
        raise InputError('dataset folder {}: no such directory'.format(path))
    found = class_names_of(path)
    if class_names is None:
        class_names = found
    unknown = sorted(set(found) - set(class_names))
    if unknown:
        raise InputError('dataset folder {}: class folder {} is not among the '
                         'training classes'.format(path, unknown[0]))
    index = ImageIndex(path, _folder_entries(path, class_names))
    if not len(index):
        raise InputError('dataset folder {}: no images found in class folders'
                         .format(path))
    return index, class_names


def class_names_of(path):
    """The class names of a training set: its class folders' names, sorted
    (the labels' order), an index's classes, or none for a list file."""
    if index_file.is_index(path):
        return index_file.read_header(path)['classes']
    if not os.path.isdir(path):
        return []
    return sorted(d for d in os.listdir(path)
                  if os.path.isdir(os.path.join(path, d)))


def _folder_entries(path, class_names):
    for label, name in enumerate(class_names):
        folder = os.path.join(path, name)
        if not os.path.isdir(folder):
            continue
        for fname in sorted(os.listdir(folder)):
            if fname.lower().endswith(IMAGE_EXTENSIONS):
                yield os.path.join(name, fname), label


def check_labels(index, n_class, source):
    """Raise if a label of ``index`` (read from ``source``) is outside
    [0, n_class)."""
    labels = index.labels
    bad = numpy.flatnonzero((labels < 0) | (labels >= n_class))
    if len(bad):
        image, label = index[int(bad[0])]
        raise InputError('{}: label {} of {} is out of range [0, {})'
                         .format(source, label, image, n_class))


def read_dataset(path, root='.', class_names=None):
    """A list file, a class-folder directory or an archive's index
    (``.index``), and its class names (None for a list file)."""
    if os.path.isdir(path):
        return read_class_folders(path, class_names)
    if index_file.is_index(path):
        return read_archive_index(path, class_names)
    return read_list_file(path, root), None


def read_archive_index(path, class_names=None):
    """The index of archive members at ``path`` (:mod:`image_data.
    index_file`) and its classes, which must be ``class_names`` (those of
    the training set) where given."""
    index, classes = index_file.read_index(path)
    if class_names is not None and classes != list(class_names):
        raise InputError('index {}: its {} classes are not the training '
                         'set\'s {}'.format(path, len(classes),
                                            len(class_names)))
    return index, classes


def read_datasets(train, val, root='.', n_class=None):
    """The checked training and validation indexes and the number of classes.

    Class-folder validation sets take the training set's class names; with
    ``n_class`` None it is the number of training classes, or for list files
    the largest label of either set + 1.
    """
    train_index, class_names = read_dataset(train, root)
    val_index, _ = read_dataset(val, root, class_names)
    if n_class is None:
        n_class = len(class_names) if class_names else 1 + max(
            int(index.labels.max()) if len(index) else 0
            for index in (train_index, val_index))
    check_labels(train_index, n_class, train)
    check_labels(val_index, n_class, val)
    return train_index, val_index, n_class

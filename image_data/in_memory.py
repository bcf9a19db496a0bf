"""A small dataset decoded once and kept in memory as uint8 arrays.

Decoding and resizing a JPEG costs far more than the crop, flip and scaling
of a 32 px image, and on a small dataset it is the same work every epoch.
:func:`pack` decodes every image once with
:func:`image_data.decoding.load_square`, at the side the transforms crop from,
into an ``.npz`` of ``images`` (N, side, side, 3) uint8, ``labels`` (N,)
int32 and ``class_names``; :func:`load` reads it back (every worker reads
its own copy: it is a file read, not a directory walk). The transforms here
are those of :mod:`image_data.transforms` without the decoding: the same crop
and flip from the same per-sample generator, so a run sees the same
minibatches from the ``.npz`` as from the image files with
``resize_whole_image`` (``--resize-whole-image``; by default the files' crops
are resized from their box alone, :mod:`image_data.crop_window`, and a few
pixels differ by one level).

    python -m image_data.in_memory DATASET OUT.npz [--crop-size 32] [--root R]
"""
import argparse
import os
import zipfile

import numpy

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch import input_files
from largebatch import npz_members
from largebatch import outputs
from image_data import image_list
from image_data.decoding import load_square
from image_data.transforms import resize_for
from largebatch.errors import InputError


class InMemoryDataset(object):
    """``(image, label)`` examples: a (side, side, 3) uint8 image and an
    int label. Slices are views."""

    def __init__(self, images, labels, class_names=()):
        self.images = images
        self._labels = labels
        self.class_names = list(class_names)

    def __len__(self):
        return len(self._labels)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return InMemoryDataset(self.images[key], self._labels[key],
                                   self.class_names)
        return self.images[key], int(self._labels[key])

    @property
    def labels(self):
        """A copy of the labels, as an ``int32`` array."""
        return self._labels.astype(numpy.int32)

    @property
    def side(self):
        return self.images.shape[1]


def pack(path, out, side, root='.', force=False):
    """Decode the list file or class folders ``path`` at ``side`` px into
    the ``.npz`` ``out`` (one array each: the whole set is held in memory);
    return the number of images. An existing ``out`` is replaced only with
    ``force`` (:mod:`largebatch.outputs`)."""
    outputs.refuse_existing(out, force, [path])
    if os.path.isdir(path):
        pairs, class_names = image_list.read_class_folders(path)
    else:
        pairs, class_names = image_list.read_list_file(path, root), []
    images = numpy.empty((len(pairs), side, side, 3), numpy.uint8)
    labels = numpy.empty(len(pairs), numpy.int32)
    for i in range(len(pairs)):
        image_path, labels[i] = pairs[i]
        images[i] = load_square(image_path, side)
    outputs.write_replacing(out, lambda f: numpy.savez(
        f, images=images, labels=labels,
        class_names=numpy.array(class_names, dtype=str)), force, [path])
    return len(pairs)


def _check_layout(path, images, labels, side):
    """Refuse, from their headers, arrays that are not N uint8 images
    ``(N, side, side, 3)`` and N integer labels."""
    if images.dtype != numpy.uint8 or len(images.shape) != 4 \
            or images.shape[3] != 3 or labels.shape != images.shape[:1] \
            or labels.dtype.kind not in 'iu' or images.shape[0] == 0:
        raise InputError('{}: expected uint8 images (N, side, side, 3) and N '
                         'integer labels, N > 0, got {} {} and {} {} labels'
                         .format(path, images.dtype, images.shape,
                                 labels.dtype, labels.shape))
    if images.shape[1:3] != (side, side):
        raise InputError(
            '{}: images are {}x{} px, this crop size needs {} (pack it again '
            'at this crop size)'.format(path, images.shape[1],
                                        images.shape[2], side))


def load(path, side):
    """The :class:`InMemoryDataset` of the ``.npz`` ``path``, checked to
    hold ``side`` px images (the resized side of the crop size)."""
    input_files.check_regular(path, 'dataset')
    if not zipfile.is_zipfile(path):
        raise InputError('dataset {}: not an .npz (no zip archive), as python '
                         '-m image_data.in_memory writes'.format(path))
    try:
        with npz_members.NpzFile(path) as npz:
            _check_layout(path, npz.header('images'), npz.header('labels'),
                          side)
            images, labels = npz['images'], npz['labels']
            class_names = npz['class_names'].tolist() \
                if 'class_names' in npz else []
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        if isinstance(e, InputError):
            raise InputError('dataset {}'.format(e)) from None
        raise InputError('dataset {}: not an .npz of images and labels, as '
                         'python -m image_data.in_memory writes ({})'
                         .format(path, e))
    bad = numpy.flatnonzero((labels < 0) |
                            (labels > numpy.iinfo(numpy.int32).max))
    if len(bad):
        raise InputError('dataset {}: label {} of image {} is not a class '
                         'index'.format(path, labels[bad[0]], bad[0]))
    if not isinstance(class_names, list) or not all(
            isinstance(name, str) for name in class_names):
        raise InputError('dataset {}: class_names is not a list of names'
                         .format(path))
    return InMemoryDataset(images, labels, class_names)


def read_datasets(train, val, side, n_class=None):
    """The training and validation ``.npz`` and the number of classes,
    checked as :func:`image_data.image_list.read_datasets` checks its layouts.

    ``n_class`` None is the number of the training set's class names (the
    largest label + 1 without names, as for list files).
    """
    if not val.endswith('.npz'):
        raise InputError('dataset {}: the validation set must be an .npz '
                         'too, as the training set {} is'.format(val, train))
    train_set, val_set = load(train, side), load(val, side)
    if val_set.class_names and val_set.class_names != train_set.class_names:
        raise InputError('dataset {}: its class names are not those of {}'
                         .format(val, train))
    n_class = n_class or len(train_set.class_names) or 1 + max(
        int(d.labels.max()) if len(d) else 0 for d in (train_set, val_set))
    for path, dataset in ((train, train_set), (val, val_set)):
        labels = dataset.labels
        bad = numpy.flatnonzero((labels < 0) | (labels >= n_class))
        if len(bad):
            raise InputError('dataset {}: label {} of image {} is out of '
                             'range [0, {})'.format(path, labels[bad[0]],
                                                    bad[0], n_class))
    return train_set, val_set, n_class


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('dataset', help='list file or class folders')
    parser.add_argument('out', help='.npz to write')
    parser.add_argument('--crop-size', type=int, default=32,
                        help='crop side the images are decoded for '
                             '(resized to crop-size x 256 / 224)')
    parser.add_argument('--root', default='.',
                        help='root of the paths in a list file')
    parser.add_argument('--force', action='store_true',
                        help='replace OUT if it exists')
    args = parser.parse_args(argv)
    if not args.out.endswith('.npz'):
        parser.error('OUT must end with .npz, got {}'.format(args.out))
    try:
        n = pack(args.dataset, args.out, resize_for(args.crop_size),
                 args.root, args.force)
    except InputError as e:
        parser.exit(2, 'in_memory: {}{}\n'.format(e, '; --force replaces it'
                                                  if getattr(e, 'replaceable',
                                                             False) else ''))
    print('wrote {} images to {}'.format(n, args.out))


if __name__ == '__main__':
    main()

"""The two ImageNet layouts: Chainer's list file and class folders.

Both give a list of ``(path, label)`` pairs; every path is checked to exist
up front so that a typo fails before any training time is spent.
"""
import os

from errors import InputError

IMAGE_EXTENSIONS = ('.jpeg', '.jpg', '.png', '.bmp', '.ppm', '.gif', '.tif',
                    '.tiff', '.webp')


def read_list_file(path, root='.'):
    """Parse ``relative/path.JPEG label`` lines of ``path``, relative to ``root``."""
    if not os.path.isfile(path):
        raise InputError('list file {}: no such file'.format(path))
    pairs = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
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
            image = os.path.join(root, fields[0])
            if not os.path.isfile(image):
                raise InputError('{}:{}: image {} does not exist (--root is {})'
                                 .format(path, lineno, image, root))
            pairs.append((image, label))
    if not pairs:
        raise InputError('list file {}: no images listed'.format(path))
    return pairs


def read_class_folders(path, class_names=None):
    """``path/<class>/*.JPEG`` with labels = the sorted class folder names.

    ``class_names`` (those of the training set) fixes the label order, so a
    validation folder with the same classes gets the same labels.
    """
    if not os.path.isdir(path):
        raise InputError('dataset folder {}: no such directory'.format(path))
    found = sorted(d for d in os.listdir(path)
                   if os.path.isdir(os.path.join(path, d)))
    if class_names is None:
        class_names = found
    unknown = sorted(set(found) - set(class_names))
    if unknown:
        raise InputError('dataset folder {}: class folder {} is not among the '
                         'training classes'.format(path, unknown[0]))
    pairs = []
    for label, name in enumerate(class_names):
        folder = os.path.join(path, name)
        if not os.path.isdir(folder):
            continue
        for fname in sorted(os.listdir(folder)):
            if fname.lower().endswith(IMAGE_EXTENSIONS):
                pairs.append((os.path.join(folder, fname), label))
    if not pairs:
        raise InputError('dataset folder {}: no images found in class folders'
                         .format(path))
    return pairs, class_names


def check_labels(pairs, n_class, source):
    """Raise if a label of ``pairs`` (read from ``source``) is outside [0, n_class)."""
    for image, label in pairs:
        if not 0 <= label < n_class:
            raise InputError('{}: label {} of {} is out of range [0, {})'
                             .format(source, label, image, n_class))

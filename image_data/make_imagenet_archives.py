"""ImageNet's three archives in their official layout, made from other images.

    python -m image_data.make_imagenet_archives --out DIR [TRAIN VAL]

writes ``ILSVRC2012_img_train.tar`` (one uncompressed ``<WNID>.tar`` per
class, members ``<WNID>_<n>.JPEG``), ``ILSVRC2012_img_val.tar`` (flat,
``ILSVRC2012_val_<8 digits>.JPEG`` in an order shuffled across classes) and
``ILSVRC2012_devkit_t12.tar.gz`` (``data/meta.mat``, the synsets as a MATLAB
struct array, and ``data/ILSVRC2012_validation_ground_truth.txt``) from the
class folders TRAIN and VAL (the embedded demo set by default), each class
folder's name standing for a WNID. As in the real devkit, the classes are
the leaf synsets, their ILSVRC2012_IDs are not in the sorted-WNID order, and
non-leaf synsets sit among them. For trying the indexer, for the tests and
for the benchmarks.
"""
import argparse
import contextlib
import io
import os
import tarfile

import numpy

from largebatch import outputs

TRAIN_TAR = 'ILSVRC2012_img_train.tar'
VAL_TAR = 'ILSVRC2012_img_val.tar'
DEVKIT = 'ILSVRC2012_devkit_t12.tar.gz'
_SYNSET_FIELDS = ('ILSVRC2012_ID', 'WNID', 'words', 'gloss', 'num_children',
                  'children', 'wordnet_height', 'num_train_images')


def write_archives(out, train, val, seed=0):
    """Write the three archives into the directory ``out``.

    ``train``: ``{wnid: [image bytes, ...]}``; ``val``: ``[(wnid, image
    bytes), ...]``. Returns the archives' paths (train, val, devkit).
    """
    rng = numpy.random.default_rng(seed)
    wnids = sorted(train)
    # leaf IDs 1..N in an order that is not the sorted WNIDs'
    ids = {wnid: int(i) + 1 for wnid, i in zip(
        wnids, rng.permutation(len(wnids)))}
    paths = [os.path.join(out, name) for name in (TRAIN_TAR, VAL_TAR, DEVKIT)]
    with _archive(paths[0], 'w', format=tarfile.GNU_FORMAT) as tar:
        for wnid in rng.permutation(wnids):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode='w',
                              format=tarfile.GNU_FORMAT) as class_tar:
                for n, data in enumerate(train[wnid]):
                    _add(class_tar, '{}_{}.JPEG'.format(wnid, n + 1), data)
            _add(tar, wnid + '.tar', inner.getvalue())
    order = rng.permutation(len(val))
    with _archive(paths[1], 'w', format=tarfile.GNU_FORMAT) as tar:
        for n, i in enumerate(order):
            _add(tar, 'ILSVRC2012_val_{:08d}.JPEG'.format(n + 1), val[i][1])
    truth = ''.join('{}\n'.format(ids[val[i][0]]) for i in order)
    with _archive(paths[2], 'w:gz') as tar:
        _add(tar, 'ILSVRC2012_devkit_t12/data/meta.mat', _meta_mat(ids))
        _add(tar, 'ILSVRC2012_devkit_t12/data/'
             'ILSVRC2012_validation_ground_truth.txt', truth.encode('ascii'))
    return paths


@contextlib.contextmanager
def _archive(path, mode, **options):
    """A new tar archive at ``path``, renamed into place when complete
    (:mod:`largebatch.outputs`: never over a file, never through a link)."""
    with outputs.open_replacing(path) as f:
        with tarfile.open(fileobj=f, mode=mode, **options) as tar:
            yield tar


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 1335830400
    tar.addfile(info, io.BytesIO(data))


def _meta_mat(ids):
    """meta.mat's bytes: the leaves, and two non-leaf synsets (IDs after
    the leaves' as in the real file) placed among them."""
    from scipy import io as matlab
    leaves = sorted(ids, key=ids.get)
    n = len(leaves)
    rows = [(ids[w], w, 'words of ' + w, 'gloss', 0, numpy.zeros(0), 0, 1300)
            for w in leaves]
    rows.insert(n // 2, (n + 1, 'n00001740', 'entity', 'gloss', 1,
                         numpy.array([n + 2]), 19, 0))
    rows.insert(1, (n + 2, 'n00002137', 'abstraction', 'gloss', n,
                    numpy.arange(1, n + 1), 18, 0))
    synsets = numpy.empty((len(rows), 1), [(f, 'O') for f in _SYNSET_FIELDS])
    for i, row in enumerate(rows):
        synsets[i, 0] = row
    buffer = io.BytesIO()
    matlab.savemat(buffer, {'synsets': synsets})
    return buffer.getvalue()


def _read_class_folders(path):
    images = {}
    for name in sorted(os.listdir(path)):
        folder = os.path.join(path, name)
        images[name] = []
        for fname in sorted(os.listdir(folder)):
            with open(os.path.join(folder, fname), 'rb') as f:
                images[name].append(f.read())
    return images


def main(argv=None):
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'demo')
    parser = argparse.ArgumentParser(
        prog='python -m image_data.make_imagenet_archives',
        description=__doc__.split('\n')[0])
    parser.add_argument('train', nargs='?',
                        default=os.path.join(demo, 'train'))
    parser.add_argument('val', nargs='?', default=os.path.join(demo, 'val'))
    parser.add_argument('--out', required=True)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    try:
        for name in (TRAIN_TAR, VAL_TAR, DEVKIT):
            outputs.refuse_existing(os.path.join(args.out, name))
    except outputs.OutputError as e:
        parser.exit(2, 'make_imagenet_archives: error: --out {}\n'.format(e))
    val = _read_class_folders(args.val)
    paths = write_archives(args.out, _read_class_folders(args.train), [
        (wnid, data) for wnid in sorted(val) for data in val[wnid]])
    print('\n'.join(paths))


if __name__ == '__main__':
    main()

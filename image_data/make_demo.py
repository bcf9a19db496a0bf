"""Write the embedded demo dataset: a Fashion-MNIST subset as RGB JPEGs.

Fashion-MNIST (Zalando Research, MIT license) is read from its IDX files
(Debian's ``dataset-fashion-mnist`` installs them under
/usr/share/datasets/fashion-mnist) and a class-balanced subset is written as
``<out>/{train,val}/<class>/<index>.jpg``: 28x28 grayscale images stored as
RGB, so the demo exercises the same decoding path as ImageNet.

    python -m image_data.make_demo [--idx-dir DIR] [--out DIR] [--force]
"""
import argparse
import gzip
import os
import shutil
import sys

import numpy
from PIL import Image

from image_data.demo import CLASS_NAMES, DEMO_ROOT

IDX_DIR = '/usr/share/datasets/fashion-mnist'


def read_idx(path):
    """An IDX file (optionally gzipped) as a numpy array."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], 'big')
             for i in range(ndim)]
    return numpy.frombuffer(data, numpy.uint8, offset=4 + 4 * ndim).reshape(
        shape)


def find_idx(idx_dir, stem):
    for name in (stem + '-ubyte.gz', stem + '-ubyte'):
        path = os.path.join(idx_dir, name)
        if os.path.exists(path):
            return path
    raise SystemExit('{}: no {}-ubyte[.gz]; install Debian\'s '
                     'dataset-fashion-mnist or pass --idx-dir'.format(
                         idx_dir, stem))


def write_split(images, labels, per_class, out):
    for label, name in enumerate(CLASS_NAMES):
        folder = os.path.join(out, name)
        os.makedirs(folder)
        for i in numpy.flatnonzero(labels == label)[:per_class]:
            Image.fromarray(images[i]).convert('RGB').save(
                os.path.join(folder, '{:05d}.jpg'.format(i)), quality=90)


def refuse_split(out, force):
    """End in one line where the folder ``out`` exists, unless ``force``
    replaces it; never a link or a file, which would be written through or
    removed."""
    if not os.path.lexists(out):
        return
    if os.path.islink(out) or not os.path.isdir(out):
        problem = 'is a link or no folder; it is never replaced'
    elif force:
        return
    else:
        problem = 'exists already; --force replaces it'
    print('make_demo: error: --out: {} {}'.format(out, problem),
          file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--idx-dir', default=IDX_DIR)
    parser.add_argument('--out', default=DEMO_ROOT)
    parser.add_argument('--train-per-class', type=int, default=300)
    parser.add_argument('--val-per-class', type=int, default=100)
    parser.add_argument('--force', action='store_true',
                        help='replace the folders OUT/train and OUT/val')
    args = parser.parse_args(argv)
    splits = (('train', 'train-images-idx3', 'train-labels-idx1',
               args.train_per_class),
              ('val', 't10k-images-idx3', 't10k-labels-idx1',
               args.val_per_class))
    for split in splits:  # nothing is removed or written before all pass
        refuse_split(os.path.join(args.out, split[0]), args.force)
    for split, images, labels, per_class in splits:
        out = os.path.join(args.out, split)
        shutil.rmtree(out, ignore_errors=True)
        write_split(read_idx(find_idx(args.idx_dir, images)),
                    read_idx(find_idx(args.idx_dir, labels)), per_class, out)
        print('wrote', out)


if __name__ == '__main__':
    main()

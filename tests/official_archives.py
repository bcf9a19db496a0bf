"""Small archives in ImageNet's official layout, and their extraction.

The extraction is written here independently of the indexer, the way a
user (or torchvision) lays the archives out: ``train/<WNID>/<file>`` from
each class tar, and ``val/<WNID>/<file>`` by the devkit's ground truth
mapped through meta.mat's ILSVRC2012_ID -> WNID.
"""
import io
import os
import tarfile

import numpy
from PIL import Image

from image_data import make_imagenet_archives

#: Class WNIDs whose sorted order differs from their ILSVRC2012_ID order.
WNIDS = ['n04', 'n01', 'n03', 'n02', 'n05']


def encoded(rng, mode='RGB', fmt='JPEG'):
    """A small random image's bytes, of a random size."""
    w, h = rng.integers(36, 90, size=2)
    pixels = rng.integers(0, 256, size=(h, w, 3), dtype=numpy.uint8)
    image = Image.fromarray(pixels).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def make(out, per_class=12, per_class_val=4, seed=0):
    """The three archives in ``out``: a PNG and a CMYK JPEG named .JPEG
    among the training images, as ImageNet has. Returns their paths."""
    rng = numpy.random.default_rng(seed)
    train = {w: [encoded(rng) for _ in range(per_class)] for w in WNIDS}
    train[WNIDS[0]][1] = encoded(rng, fmt='PNG')
    train[WNIDS[1]][2] = encoded(rng, mode='CMYK')
    val = [(w, encoded(rng)) for w in WNIDS for _ in range(per_class_val)]
    return make_imagenet_archives.write_archives(str(out), train, val)


def standard_labels(devkit):
    """``(sorted leaf WNIDs, {val file name: WNID})`` read from the
    devkit as torchvision reads it."""
    from scipy import io as matlab
    with tarfile.open(devkit) as tar:
        names = tar.getnames()
        meta = tar.extractfile(next(n for n in names if n.endswith(
            'data/meta.mat'))).read()
        truth = tar.extractfile(next(n for n in names if n.endswith(
            'ground_truth.txt'))).read().decode().split()
    synsets = matlab.loadmat(io.BytesIO(meta), squeeze_me=True)['synsets']
    leaves = [s for s in synsets if s['num_children'] == 0]
    wnid_of = {int(s['ILSVRC2012_ID']): str(s['WNID']) for s in leaves}
    return sorted(wnid_of.values()), truth, wnid_of


def extract(train_tar, val_tar, devkit, out):
    """Extract the archives into ``out/train`` and ``out/val`` class
    folders; returns their paths."""
    _, truth, wnid_of = standard_labels(devkit)
    train_dir, val_dir = os.path.join(out, 'train'), os.path.join(out, 'val')
    with tarfile.open(train_tar) as tar:
        for info in tar:
            wnid = info.name[:-len('.tar')]
            inner = io.BytesIO(tar.extractfile(info).read())
            with tarfile.open(fileobj=inner) as class_tar:
                class_tar.extractall(os.path.join(train_dir, wnid),
                                     filter='data')
    with tarfile.open(val_tar) as tar:
        names = sorted(tar.getnames())
        for name, ilsvrc_id in zip(names, truth):
            folder = os.path.join(val_dir, wnid_of[int(ilsvrc_id)])
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, name), 'wb') as f:
                f.write(tar.extractfile(name).read())
    return train_dir, val_dir

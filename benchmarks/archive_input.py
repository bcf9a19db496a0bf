#!/usr/bin/env python
"""Training from an archive's index against the same images as files.

    python -m benchmarks.archive_input [--rounds 5] [--images 400]
        [--members 100000]

One run, the same JPEGs (ImageNet-like, :mod:`benchmarks.photos`, written
into ImageNet's official archives by
:mod:`image_data.make_imagenet_archives`, indexed by
:mod:`image_data.archives` and extracted into class folders):

    files     ``TrainTransform`` (read, decode, resize, random 224 crop,
              flip, mean) of ``(path, label)`` from the class folders
    archive   the same of ``(archive member, label)`` from ``train.index``

It prints, for each, the opens of data files and all system calls per image
(``strace -f`` of a process that loads one image more than ``--images``,
less one that loads one: the first image's one-time work, such as Pillow's
plug-in imports and the archive's one open, is left out) and
the images/s per core (process CPU time, one thread; rounds alternate the
order, each in a process of its own, as a loader runs); then the indexer's
rate, in tar headers/s, on an official-layout training archive of
``--members`` images, with the time it implies for ImageNet's 1,281,167
training and 50,000 validation images.
"""
import argparse
import io
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import numpy

from benchmarks.photos import write_photos
import image_data
from image_data import archives
from image_data import index_file
from image_data import make_imagenet_archives

#: ImageNet's training and validation images.
IMAGENET_MEMBERS = 1281167 + 50000
_PROGRAM = '''
import sys
import numpy
sys.path.insert(0, {repo!r})
from largebatch import chainer_compat
import image_data
from image_data import index_file
from benchmarks import archive_input
examples = archive_input.examples({form!r}, {index!r}, {folders!r})
transform = archive_input.transform()
for i in range({count}):
    transform(examples[i % len(examples)], numpy.random.default_rng(i))
'''


def transform(crop_size=224):
    side = image_data.resize_for(crop_size)
    return image_data.TrainTransform(crop_size,
                                     image_data.load_mean(None, side), side)


def examples(form, index, folders):
    """The training examples of the index, or of its extraction."""
    if form == 'archive':
        return index_file.read_index(index)[0]
    return image_data.read_class_folders(folders)[0]


def make_data(folder, photos, per_class=100, classes=10):
    """Official archives of ``classes x per_class`` images cut from
    ``photos``, their index and their extraction."""
    data = []
    for path in photos:
        with open(path, 'rb') as f:
            data.append(f.read())
    train = {'n{:08d}'.format(c): [data[(c + i) % len(data)]
                                   for i in range(per_class)]
             for c in range(classes)}
    val = [(wnid, images[0]) for wnid, images in sorted(train.items())]
    paths = make_imagenet_archives.write_archives(folder, train, val)
    index = os.path.join(folder, 'index')
    archives.index_archives(*paths, index,
                            progress=archives.Progress(io.StringIO()))
    folders = os.path.join(folder, 'train')
    for wnid, images in train.items():
        os.makedirs(os.path.join(folders, wnid))
        for i, image in enumerate(images):
            with open(os.path.join(folders, wnid,
                                   '{}_{}.JPEG'.format(wnid, i + 1)),
                      'wb') as f:
                f.write(image)
    return os.path.join(index, 'train.index'), folders


def syscalls(form, index, folders, count):
    """``(opens of the data, all calls)`` of a process that loads ``count``
    images, from its ``strace -f`` trace; None without strace. The data
    are the files under the folder that holds ``index`` and ``folders``."""
    if not shutil.which('strace'):
        return None
    program = _PROGRAM.format(repo=os.getcwd(), form=form, index=index,
                              folders=folders, count=count)
    data = os.path.commonpath([index, folders])
    with tempfile.NamedTemporaryFile('r') as trace:
        subprocess.run(['strace', '-f', '-qq', '-o', trace.name,
                        sys.executable, '-c', program], check=True,
                       env=dict(os.environ, OMP_NUM_THREADS='1'))
        calls = [line for line in trace if re.match(r'\d+ +\w+\(', line)]
    opens = [line for line in calls if re.match(
        r'\d+ +open(?:at)?\(.*"{}/'.format(re.escape(data)), line)]
    return len(opens), len(calls)


def rate(form, index, folders, count):
    """Images/s of the training transform, process CPU time, after one
    warm-up pass over the examples."""
    items, apply = examples(form, index, folders), transform()

    def run(n):
        start = time.process_time()
        for i in range(n):
            apply(items[i % len(items)], numpy.random.default_rng(i))
        return time.process_time() - start
    run(min(len(items), count))
    return count / run(count)


def indexer_rate(folder, members, classes=1000):
    """Headers/s of the indexer on an official-layout training archive of
    ``members`` tiny images (the headers are what it reads)."""
    per_class = -(-members // classes)
    train = {'n{:08d}'.format(c): [b'\xff\xd8 image'] * per_class
             for c in range(classes)}
    val = [(wnid, b'\xff\xd8 image') for wnid in sorted(train)]
    paths = make_imagenet_archives.write_archives(folder, train, val)
    progress = archives.Progress(io.StringIO())
    archives.index_archives(*paths, os.path.join(folder, 'index'),
                            progress=progress)
    return progress.headers, progress.rate()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--images', type=int, default=400,
                        help='images per form and round (default: 400)')
    parser.add_argument('--members', type=int, default=100000,
                        help='images of the indexer\'s archive')
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        photos = write_photos(folder, 8)
        index, folders = make_data(folder, photos)
        print('{} images of 500x375 or 375x500 px (JPEG quality 90), 224 '
              'crop of 256; decoder {}'.format(
                  len(examples('archive', index, folders)),
                  transform().decoder))
        print('per image (strace -f, {} + 1 images less 1):'.format(
            args.images))
        for form in ('files', 'archive'):
            syscalls(form, index, folders, 1)  # Python's caches written
            counts = [syscalls(form, index, folders, n)
                      for n in (args.images + 1, 1)]
            if counts[0] is None:
                print('  {:<8} strace is not installed'.format(form))
                continue
            opens, calls = (numpy.subtract(counts[0], counts[1]) /
                            args.images)
            print('  {:<8} file opens {:.3f}  system calls {:.2f}'.format(
                form, opens, calls))
        rates = {'files': [], 'archive': []}
        with multiprocessing.get_context('fork').Pool(
                1, maxtasksperchild=1) as pool:
            for r in range(args.rounds):
                for form in sorted(rates, reverse=bool(r % 2)):
                    rates[form].append(pool.apply(
                        rate, (form, index, folders, args.images)))
        print('images/s per core, {} rounds of {} images:'.format(
            args.rounds, args.images))
        for form, values in rates.items():
            print('  {:<8} median {:6.0f}  ({})'.format(
                form, numpy.median(values),
                ', '.join('{:.0f}'.format(v) for v in values)))
        ratios = numpy.array(rates['archive']) / numpy.array(rates['files'])
        print('archive / files: {:.3f}  (per round {})'.format(
            numpy.median(ratios), ', '.join('{:.3f}'.format(r)
                                            for r in ratios)))
    with tempfile.TemporaryDirectory() as folder:
        headers, per_second = indexer_rate(folder, args.members)
        print('indexer: {:,} tar headers at {:,.0f} a second; ImageNet\'s '
              '{:,} images and 1,001 class and archive headers: {:.0f} s'
              .format(headers, per_second, IMAGENET_MEMBERS,
                      (IMAGENET_MEMBERS + 1001) / per_second))


if __name__ == '__main__':
    main()

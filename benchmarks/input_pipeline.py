#!/usr/bin/env python
"""Images/s per core of the training transform, old path against new.

    python -m benchmarks.input_pipeline [--rounds 5] [--images 200]
        [--crop-size 224]

Times ``image_data.TrainTransform`` (decode, resize, random crop, flip, mean
subtraction) in process CPU time, on one thread (so per core), on
ImageNet-like JPEGs cut from a real photograph (:mod:`benchmarks.photos`),
each image with its own seeded generator as the training iterator gives:

    old       Pillow decodes, resizes the whole image, then the crop is
              taken (``--decoder pillow --resize-whole-image``)
    crop box  Pillow decodes; only the crop's box is resized
              (``--decoder pillow``)
    new       simplejpeg decodes where installed; only the crop's box is
              resized (the defaults)

Rounds alternate the paths so that load from other processes meets all of
them alike; each path and round runs in a new process forked from the
benchmark's, as a loader process runs one path alone. It prints each path's
images/s per round and their medians, the median ratio to the old path
with each round's, a profile of the steps of one image (each step alone),
and how far each path's pixels are from the old path's on the same seeds
(in levels of 0..255).
"""
import argparse
import multiprocessing
import tempfile
import time

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import numpy
from PIL import Image

from benchmarks.photos import write_photos
import image_data
from image_data import crop_window
from image_data import decoding


#: ``(name, TrainTransform keyword arguments)`` of the timed paths.
PATHS = (('old', dict(decoder='pillow', resize_whole_image=True)),
         ('crop box', dict(decoder='pillow')),
         ('new', dict(decoder='auto')))


def cpu_seconds(fn, n):
    start = time.process_time()
    for i in range(n):
        fn(i)
    return time.process_time() - start


def images_per_second(transform, paths, n):
    """Images/s of ``transform`` after a warm-up over the images."""
    def run(i):
        return transform((paths[i % len(paths)], 0),
                         numpy.random.default_rng([0, i]))
    cpu_seconds(run, len(paths))
    return n / cpu_seconds(run, n)


def transform_rates(transforms, paths, n, rounds):
    """Images/s of every transform per round, the order alternating; each
    measured in a process of its own forked from this one, as a loader runs
    one transform in its own process (its heap holds that path's
    allocations alone)."""
    rates = {name: [] for name in transforms}
    with multiprocessing.get_context('fork').Pool(1, maxtasksperchild=1) \
            as pool:
        for r in range(rounds):
            for name in sorted(transforms, reverse=bool(r % 2)):
                rates[name].append(pool.apply(
                    images_per_second, (transforms[name], paths, n)))
    return rates


def profile(paths, side, crop, n):
    """Milliseconds per image of each step, on the first image."""
    path = paths[0]
    mean = image_data.load_mean(None, side)
    transform = image_data.TrainTransform(crop, mean, side)
    with Image.open(path) as image:
        decoded = decoding._draft_rgb(image, side)
    pixels = numpy.asarray(decoded)
    height, width = pixels.shape[:2]
    new_w, new_h = decoding.resized_size(width, height, side)
    corner = (side - crop) // 2
    box = crop_window.source_box(width, height, side, corner, corner, crop)
    window = crop_window.resize_box(pixels, box, crop)
    steps = [
        ('decode, Pillow', lambda i: decoding.load_rgb(path, side, 'pillow')),
        ('resize whole image + crop, Pillow', lambda i: numpy.asarray(
            decoded.resize((new_w, new_h), Image.BILINEAR).crop(
                (0, 0, side, side)))),
        ('resize crop box, Pillow', lambda i: numpy.asarray(
            Image.fromarray(pixels).resize((crop, crop), Image.BILINEAR,
                                           box=box))),
        ('normalize (flip, mean, CHW)',
         lambda i: transform._normalize(window, corner, corner, True)),
    ]
    if crop_window._resample is not None:
        steps.insert(3, ('resize crop box, C loops',
                         lambda i: crop_window.resize_box(pixels, box, crop)))
    if decoding.simplejpeg is not None:
        steps.insert(1, ('decode, simplejpeg',
                         lambda i: decoding.load_rgb(path, side,
                                                     'simplejpeg')))

    for name, fn in steps:
        fn(0)
        ms = min(cpu_seconds(fn, n) for _ in range(3)) / n * 1e3
        print('  {:<36} {:.3f} ms'.format(name, ms))


def pixel_differences(transforms, paths, seeds):
    """Per path: max and mean |difference| from the old path in levels,
    and the share of values that differ."""
    old = transforms['old']
    for name, transform in transforms.items():
        if name == 'old':
            continue
        diffs = numpy.concatenate([numpy.rint(255 * numpy.abs(
            transform((p, 0), numpy.random.default_rng([0, s]))[0] -
            old((p, 0), numpy.random.default_rng([0, s]))[0])).ravel()
            for s in range(seeds) for p in paths])
        print('  {:<9} max {:.0f}  mean {:.4f}  differing {:.3%}'.format(
            name, diffs.max(), diffs.mean(), numpy.mean(diffs > 0)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--images', type=int, default=200,
                        help='images per path and round (default: 200)')
    parser.add_argument('--crop-size', type=int, default=224)
    args = parser.parse_args(argv)
    side = image_data.resize_for(args.crop_size)
    mean = image_data.load_mean(None, side)
    transforms = {name: image_data.TrainTransform(args.crop_size, mean, side,
                                                  **kwargs)
                  for name, kwargs in PATHS}
    with tempfile.TemporaryDirectory() as folder:
        paths = write_photos(folder)
        rates = transform_rates(transforms, paths, args.images, args.rounds)
        print('training transform, {} crop of {} px, {} JPEGs (500x375 and '
              '375x500, quality 90); decoder auto = {}, C resize {}'.format(
                  args.crop_size, side, len(paths),
                  transforms['new'].decoder,
                  'built' if crop_window._resample else 'not built'))
        print('images/s per core, {} rounds of {} images:'.format(
            args.rounds, args.images))
        for name, values in rates.items():
            print('  {:<9} median {:6.0f}  ({})'.format(
                name, numpy.median(values),
                ', '.join('{:.0f}'.format(v) for v in values)))
        for name in rates:
            if name != 'old':
                ratios = numpy.array(rates[name]) / numpy.array(rates['old'])
                print('{} / old: {:.2f}  (per round {})'.format(
                    name, numpy.median(ratios),
                    ', '.join('{:.2f}'.format(r) for r in ratios)))
        print('one image, CPU ms per step:')
        profile(paths, side, args.crop_size, max(20, args.images // 4))
        print('pixels against the old path, {} seeds x {} images:'.format(
            10, len(paths)))
        pixel_differences(transforms, paths, 10)


if __name__ == '__main__':
    main()

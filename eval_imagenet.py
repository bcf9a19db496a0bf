#!/usr/bin/env python
"""Top-1, top-5 and loss of a trained model on a validation set, or the
top-5 classes of images.

    python eval_imagenet.py MODEL VAL [--root DIR] [--gpu N]
    python eval_imagenet.py MODEL --predict IMAGE [IMAGE ...]

``MODEL`` is the trainer's model.npz or one of its snapshots; ``VAL`` a
list file, class folders or a decoded ``.npz``, read and preprocessed as the
trainer reads its validation set, with the crop, resize and mean the model
file names. The figures are the trainer's (its closing line's, on the same
data and device).
"""
import argparse
import sys

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch import console
from largebatch import cuda_stack
cuda_stack.preload()  # pip's CUDA libraries, before CuPy loads (docs/gpu.md)

import chainer  # NOQA: E402
import chainer.functions as F  # NOQA: E402
import numpy  # NOQA: E402

import image_data  # NOQA: E402
from image_data import in_memory  # NOQA: E402
from image_data.image_list import read_dataset  # NOQA: E402
from largebatch.errors import InputError  # NOQA: E402
from largebatch.errors import LoaderDiedError  # NOQA: E402
from largebatch.errors import out_of_memory_text  # NOQA: E402
from extensions.evaluator import batch_sums  # NOQA: E402
import models  # NOQA: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    add = parser.add_argument
    add('model', help='model.npz or a snapshot of the trainer')
    add('val', nargs='?', help='list file, class folders or decoded .npz')
    add('--root', '-R', default='.',
        help='root of the paths in a list file (default: %(default)s)')
    add('--predict', nargs='+', metavar='IMAGE',
        help='print the top-5 classes of these images instead')
    add('--gpu', '-g', type=int, default=-1,
        help='GPU id; -1: the CPU (default: %(default)s)')
    add('--batchsize', '-b', type=int, default=250,
        help='images per batch (default: %(default)s)')
    add('--loaderjob', '-j', type=int, default=0,
        help='image-loading processes (default: %(default)s)')
    add('--crop-size', type=int, help='crop side (default: the model\'s)')
    add('--mean', help='mean .npy (default: the model\'s)')
    add('--max-image-mib', type=int, default=64,
        help='an image of more MiB is a bad image, not read (default: '
        '%(default)s)')
    args = parser.parse_args(argv)
    if (args.val is None) == (args.predict is None):
        parser.error('give a validation set, or --predict IMAGE ...')
    if args.batchsize < 1:
        parser.error('--batchsize must be positive, got {}'.format(
            args.batchsize))
    if args.max_image_mib < 1:
        parser.error('--max-image-mib must be positive, got {}'.format(
            args.max_image_mib))
    if args.crop_size is not None and args.crop_size < 32:
        parser.error('--crop-size must be at least 32, got {}'.format(
            args.crop_size))
    return args


def preprocessing(metadata, crop_size=None, mean_path=None):
    """``(crop_size, resize, mean)``: the model's, or the flags'; a model
    without them (a snapshot) takes ImageNet's 224 and mean."""
    crop = crop_size or int(metadata.get('crop_size', 224))
    resize = (int(metadata['resize']) if 'resize' in metadata and not
              crop_size else image_data.resize_for(crop))
    if mean_path:
        try:
            mean = image_data.load_mean(mean_path, resize)
        except InputError as e:
            raise InputError('--mean {}'.format(e))
    else:
        mean = metadata.get('mean', image_data.load_mean(None, resize))
    return crop, resize, mean


def read_validation(path, root, class_names, n_class, resize):
    """The validation set as ``(image or path, label)`` pairs, its labels
    checked against the model's ``n_class`` classes as the trainer checks
    them. Class folders take the model's class names for their labels; a
    model without names (a snapshot) takes as many folders as it has
    classes, else their sorted names would not be its labels."""
    if path.endswith('.npz'):
        pairs = in_memory.load(path, resize)
        if len(pairs.class_names) and class_names and \
                pairs.class_names != class_names:
            raise InputError('{}: its class names are not the model\'s'
                             .format(path))
    else:
        folders = image_data.class_names_of(path)
        if folders and not class_names and len(folders) != n_class:
            raise InputError(
                '{}: {} class folders, the model has {} classes and no '
                'names for them: its labels cannot be matched to the '
                'folders (evaluate its model.npz, which names them)'.format(
                    path, len(folders), n_class))
        pairs = read_dataset(path, root, class_names or None)[0]
    labels = pairs.labels
    bad = numpy.flatnonzero((labels < 0) | (labels >= n_class))
    if len(bad):
        raise InputError('{}: label {} of its image {} is not one of the '
                         'model\'s {} classes'.format(
                             path, labels[bad[0]], int(bad[0]) + 1, n_class))
    return pairs


def evaluate(network, pairs, transform, device, batchsize, loaderjob=0):
    """``(loss, top-1, top-5, images)`` over ``pairs``, as the trainer's
    validation scores them."""
    iterator = image_data.validation_iterator(
        pairs, 0, 1, transform, batchsize, loaderjob)
    sums = numpy.zeros(4)
    try:
        with chainer.using_config('train', False), \
                chainer.no_backprop_mode():
            for batch in iterator:
                x, t = chainer.dataset.concat_examples(batch, device)
                sums += batch_sums(network(x).array, t)
    finally:
        iterator.finalize()
    loss, top1, top5, count = sums
    return loss / count, top1 / count, top5 / count, int(count)


def predict(network, paths, transform, device, class_names):
    """One line per image: its top-5 classes with their probabilities."""
    lines = []
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        for path in paths:
            x, _ = transform((path, 0))
            p = chainer.backend.CpuDevice().send(F.softmax(network(
                device.send(x[None]))).array[0])
            top = numpy.argsort(-p)[:5]
            lines.append('{}: {}'.format(path, ', '.join(
                '{} {:.2%}'.format(class_names[i] if i < len(class_names)
                                   else 'class {}'.format(i), p[i])
                for i in top)))
    return lines


def main(argv=None):
    args = parse_args(argv)
    console.print_any_text()
    try:
        network, metadata = models.saved_model.load(args.model)
        crop, resize, mean = preprocessing(metadata, args.crop_size,
                                           args.mean)
        if args.gpu >= 0:
            cuda_stack.check(allow_no_cudnn=True, need_nccl=False,
                             requested=args.gpu)
            layers = models.chainer_layers
        else:
            import cpu_engine  # the trainer's layers on CPUs
            layers = cpu_engine
        network = models.saved_model.as_trained(network, metadata, layers)
        device = chainer.get_device(
            '@cupy:{}'.format(args.gpu) if args.gpu >= 0 else '@numpy')
        device.use()
        network.to_device(device)
        transform = image_data.ValTransform(
            crop, mean, resize, max_image_bytes=args.max_image_mib << 20)
        class_names = metadata.get('class_names') or []
        if args.predict:
            print('\n'.join(predict(network, args.predict, transform, device,
                                    class_names)))
            return
        loss, top1, top5, count = evaluate(
            network, read_validation(args.val, args.root, class_names,
                                     int(metadata['n_class']), resize),
            transform, device, args.batchsize, args.loaderjob)
    except InputError as e:
        print('eval_imagenet.py: error: {}'.format(e), file=sys.stderr)
        sys.exit(2)
    except MemoryError as e:  # NumPy's, or CuPy's OutOfMemoryError
        print('eval_imagenet.py: error: {}; a smaller --batchsize needs '
              'less'.format(out_of_memory_text(e)), file=sys.stderr)
        sys.exit(1)
    except LoaderDiedError as e:
        print('eval_imagenet.py: error: {}; fewer --loaderjob processes need '
              'less memory'.format(e), file=sys.stderr)
        sys.exit(1)
    print('validation top-1 {:.2%}, top-5 {:.2%}, loss {:.4g} on {} images '
          'of {}'.format(top1, top5, loss, count, args.val))


if __name__ == '__main__':
    main()

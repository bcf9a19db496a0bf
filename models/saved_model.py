"""model.npz: the trained network and what it takes to use it.

Beside the network's arrays (the keys ``chainer.serializers.load_npz``
reads into :class:`models.ResNet50`), the file holds plain arrays under
``metadata/``, no pickle: the format, the architecture, width and class
count, the class names, the preprocessing (resize, crop, mean), the recipe
and the final validation figures. :func:`load` reads such a file, a
model.npz written before the metadata (its width and classes read from the
shapes of its first and last layers), a trainer's snapshot (turned into
the same plain network as the trainer's own model.npz, with
:func:`models.plain_copy`), or the arrays of Chainer's
``chainer.links.ResNet50Layers`` (:mod:`models.chainer_resnet50`).
"""
import functools
import json
import zipfile
import zlib

import chainer
from chainer.serializers import npz
import numpy

from largebatch import input_files
from largebatch import npz_members
from largebatch.errors import InputError
from models import chainer_layers
from models import chainer_resnet50
from models.builder import ARCHS
from models.builder import build_classifier
from models.builder import ClassifierSpec
from models.inference import mixed16_copy
from models.inference import plain_copy
from models.mixed_precision import MixedPrecision

#: ``metadata/format`` of the files this module writes.
FORMAT = 'chainer-largebatch-resnet50 model 1'
METADATA = 'metadata/'
#: What the network takes, in words (also ``metadata/preprocessing``).
PREPROCESSING = ('RGB, the shorter side resized to `resize` (bilinear) and '
                 'the longer one centre-cropped, the centre `crop_size` '
                 'square, (pixel - mean) / 255 in float32, CHW')
_SNAPSHOT_MODEL = 'updater/model:main/'
_SNAPSHOT_CONFIG = 'extensions/run_configuration/'
#: The most bytes one member of a model's metadata may hold (class names,
#: a per-pixel mean).
METADATA_BYTES = 64 << 20


class ModelFile(object):
    """What ``chainer.serializers.save_npz`` (or the trainer's atomic
    writer) saves as model.npz: ``network``'s arrays and ``metadata``, a
    dict of values NumPy stores without pickle (numbers, strings, lists of
    strings, arrays; dicts as JSON)."""

    def __init__(self, network, metadata):
        self.network = network
        self.metadata = dict(metadata, format=FORMAT,
                             preprocessing=PREPROCESSING)

    def serialize(self, serializer):
        self.network.serialize(serializer)
        for key, value in sorted(self.metadata.items()):
            if isinstance(value, dict):
                value = json.dumps(value, sort_keys=True)
            if isinstance(value, (list, tuple)) and not value:
                value = numpy.zeros(0, 'U1')
            serializer(METADATA + key, numpy.asarray(value))


#: The figures of the final validation that model.npz keeps.
VALIDATION_KEYS = ('validation/main/accuracy', 'validation/main/top5',
                   'validation/main/loss', 'iteration', 'epoch')


def trained(predictor, arch, width, n_class, validation, **metadata):
    """The :class:`ModelFile` of a trainer's network: its plain float32
    copy (:func:`models.plain_copy`), the architecture, the figures of
    ``validation`` (the log's last validation entry, or None) and
    ``metadata`` (class names, preprocessing, recipe)."""
    network = plain_copy(predictor, functools.partial(
        ARCHS[arch], n_class, width=width))
    return ModelFile(network, dict(
        metadata, arch=arch, width=width, n_class=n_class, validation={
            key: validation[key] for key in VALIDATION_KEYS}
        if validation else {}))


def load(path):
    """``(network, metadata)`` of a model.npz or a trainer's snapshot:
    the plain float32 network on the CPU and its metadata (the keys of
    :class:`ModelFile`; a snapshot's or an older model's have the
    architecture, width and class count). :class:`InputError` naming the
    file for anything else."""
    input_files.check_regular(path)
    if not zipfile.is_zipfile(path):
        raise InputError('{}: not a model.npz or snapshot (not an .npz '
                         'archive)'.format(path))
    try:
        with npz_members.NpzFile(path) as archive:
            network, metadata = _load(archive, path)
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, OSError, EOFError,
            zipfile.BadZipFile, zlib.error, IndexError) as e:  # damaged
        text = str(e.args[0] if isinstance(e, KeyError) and e.args else e)
        raise InputError('{}: a damaged model or one this code did not write '
                         '({}: {})'.format(path, type(e).__name__,
                                           text.splitlines()[0] if text
                                           else '')) from None
    _check_finite(network, path)
    return network, metadata


def _check_finite(network, path):
    """InputError naming the first array of ``network`` that holds NaN or
    inf: a model that diverged, which would train or score as noise."""
    arrays = npz.DictionarySerializer()
    arrays.save(network)
    for name, value in arrays.target.items():
        if value.dtype.kind == 'f' and not numpy.isfinite(value).all():
            raise InputError('{}: its {} holds values that are not finite '
                             '(NaN or inf); the model diverged or is damaged'
                             .format(path, name))


def _load(archive, path):
    keys = set(archive.files)
    if METADATA + 'format' in keys:
        metadata = _read_metadata(archive, path)
        return _network(archive, path, metadata), metadata
    if _SNAPSHOT_CONFIG + 'arch' in keys:
        return _from_snapshot(archive, path)
    if {'res2/a/conv1/W', 'fc6/W'} <= keys:  # ResNet50Layers'
        metadata = {'arch': 'resnet50', 'width': 1.0,
                    'n_class': archive.header('fc6/W').shape[0]}
        network = _build(metadata, path)
        for name, shape in chainer_resnet50.chainer_shapes(network).items():
            if name in archive and archive.header(name).shape != shape:
                raise InputError('{}: not a ResNet50Layers model ({} has '
                                 'shape {}, ResNet-50 {})'.format(
                                     path, name, archive.header(name).shape,
                                     shape))
        try:
            chainer_resnet50.from_chainer_arrays(archive, network)
        except (KeyError, ValueError) as e:
            raise InputError('{}: not a ResNet50Layers model ({})'.format(
                path, e))
        return network, metadata
    if {'conv1/W', 'fc/W'} <= keys:  # written before the metadata
        metadata = {'arch': 'resnet50',
                    'width': archive.header('conv1/W').shape[0] / 64.,
                    'n_class': archive.header('fc/W').shape[0]}
        return _network(archive, path, metadata), metadata
    raise InputError('{}: not a model.npz or snapshot this trainer wrote'
                     .format(path))


def _read_metadata(archive, path):
    metadata = {}
    for key in archive.files:
        if key.startswith(METADATA):
            if archive.header(key).nbytes > METADATA_BYTES:
                raise InputError('{}: {} holds {} bytes, above the {} of '
                                 'a model\'s metadata'.format(
                                     path, key, archive.header(key).nbytes,
                                     METADATA_BYTES))
            value = archive[key]
            metadata[key[len(METADATA):]] = (
                value.tolist() if value.ndim or value.dtype.kind in 'US'
                else value.item())
    if metadata['format'] != FORMAT:
        raise InputError('{}: a model of format {!r}, this code reads {!r}'
                         .format(path, metadata['format'], FORMAT))
    for key in ('recipe', 'validation'):
        if key in metadata:
            metadata[key] = json.loads(metadata[key])
    if 'mean' in metadata:
        metadata['mean'] = numpy.asarray(metadata['mean'], numpy.float32)
    _check_preprocessing(metadata, path)
    return metadata


def _check_preprocessing(metadata, path):
    """InputError unless the crop fits the resized side and the mean is
    per channel or per pixel of it, in 0..255, as the trainer wrote them."""
    crop, resize = metadata.get('crop_size'), metadata.get('resize')
    if crop is not None and resize is not None and not (
            0 < int(crop) <= int(resize)):
        raise InputError('{}: crop size {} does not fit its resized side {}'
                         .format(path, crop, resize))
    mean = metadata.get('mean')
    if mean is not None and (
            mean.shape not in ((3,), (3, resize, resize)) or
            not numpy.isfinite(mean).all() or mean.min() < 0 or
            mean.max() > 255):
        raise InputError('{}: its mean (shape {}) is not a (3,) or (3, {}, '
                         '{}) mean of 8-bit pixels'.format(
                             path, mean.shape, resize, resize))


def _check_arch(metadata, path):
    if metadata.get('arch') not in ARCHS:
        raise InputError('{}: architecture {!r}, this code builds {}'.format(
            path, metadata.get('arch'), ', '.join(sorted(ARCHS))))


def _build(metadata, path):
    _check_arch(metadata, path)
    with chainer.using_config('dtype', numpy.float32):
        return ARCHS[metadata['arch']](int(metadata['n_class']),
                                       width=float(metadata['width']))


def _network(archive, path, metadata):
    _check_arch(metadata, path)
    _check_counts(archive, path, metadata, '')
    network = _build(metadata, path)
    _deserialize(network, archive, path, '')
    return network


def _check_counts(archive, path, metadata, prefix):
    """InputError unless the first and last layers (``prefix``: their
    network's in the file) have the width and class count the metadata
    gives: the network is built from those counts before its arrays are
    read, so the file cannot ask for more memory than its arrays take."""
    width, n_class = float(metadata['width']), int(metadata['n_class'])
    for key, rows in (('conv1/W', max(1, int(round(64 * width)))),
                      ('fc/W', n_class)):
        if prefix + key not in archive:
            raise InputError('{}: holds no {}, not a {} it describes'.format(
                path, prefix + key, metadata['arch']))
        shape = archive.header(prefix + key).shape
        if shape[:1] != (rows,):
            raise InputError(
                '{}: its {} has shape {}, its width {:g} and {} classes '
                'need {} rows'.format(path, prefix + key, shape, width,
                                      n_class, rows))


def _deserialize(link, archive, path, prefix):
    """Load ``link`` from ``archive``, every array's header checked before
    any payload is read: Chainer's loader would broadcast another shape."""
    arrays = npz.DictionarySerializer()  # each array, named as in the file
    arrays.save(link)
    for name, value in arrays.target.items():
        key = prefix + name
        if key in archive:
            header = archive.header(key)
            if header.shape != value.shape:
                raise InputError('{}: {} has shape {}, the {} holds {}'
                                 .format(path, key, header.shape,
                                         type(link).__name__, value.shape))
            if header.dtype.kind not in 'biuf':
                raise InputError('{}: {} is of dtype {}, expected numbers'
                                 .format(path, key, header.dtype))
    try:
        link.serialize(npz.NpzDeserializer(archive, path=prefix))
    except (KeyError, ValueError) as e:
        raise InputError('{}: does not fit the {} it describes ({})'.format(
            path, type(link).__name__, str(e).strip("'")))


def _from_snapshot(archive, path):
    def config(key, default=None):
        name = _SNAPSHOT_CONFIG + key
        return archive[name].item() if name in archive.files else default
    metadata = {'arch': config('arch'), 'width': config('width'),
                'n_class': config('n_class')}
    _check_arch(metadata, path)
    _check_counts(archive, path, metadata, _SNAPSHOT_MODEL + (
        'predictor/network/' if config('dtype') == 'mixed16'
        else 'predictor/'))
    trained = build_classifier(ClassifierSpec(
        int(metadata['n_class']), metadata['arch'], float(metadata['width']),
        config('bn_stats'), config('bn_variance', 'mean'),
        int(config('accumulate', 1)), config('dtype', 'float32')),
        layers=chainer_layers)
    _deserialize(trained, archive, path, _SNAPSHOT_MODEL)
    return plain_copy(trained.predictor, lambda: _build(metadata, path)), \
        metadata


def as_trained(network, metadata, layers=chainer_layers):
    """``network`` (as :func:`load` gives it) in the precision it was
    trained in: under a ``mixed16`` recipe, its float16 form built from
    ``layers`` (the layer set the trainer uses on the device: the CPU
    engine's on CPUs; :func:`models.inference.mixed16_copy`), which scores
    as the trainer's closing line did; else ``network`` itself (in float32,
    Chainer's links compute what either layer set computes)."""
    if metadata.get('recipe', {}).get('dtype') != 'mixed16':
        return network
    return mixed16_copy(network, functools.partial(
        ARCHS[metadata['arch']], int(metadata['n_class']),
        width=float(metadata['width']), layers=layers,
        norm=layers.BatchNormalization))


def _shape_of(param):
    return 'absent' if param is None else str(param.shape)


def initialize(target, path):
    """Start ``target`` (the trainer's network, before it moves to its
    device) from the model at ``path`` (anything :func:`load` reads): every
    parameter, and the moving averages where ``target`` keeps them. The
    classifier's head (``fc``) is left as initialized when the class counts
    differ. Returns the line that says so, or None."""
    source, metadata = load(path)
    if isinstance(target, MixedPrecision):
        target = target.network
    theirs = dict(source.namedparams())
    mine = dict(target.namedparams())
    differ = [name for name in sorted(set(theirs) | set(mine))
              if name not in theirs or name not in mine or (
                  theirs[name].shape != mine[name].shape and
                  not name.startswith('/fc/'))]
    if differ:
        name = differ[0]
        raise InputError('{}: a {} of width {:g}, not the network of this '
                         'run: its {} is {}, this run\'s {}'.format(
                             path, metadata['arch'], float(metadata['width']),
                             name, _shape_of(theirs.get(name)),
                             _shape_of(mine.get(name))))
    new_head = theirs['/fc/W'].shape != mine['/fc/W'].shape
    for name, param in mine.items():
        if not (new_head and name.startswith('/fc/')):
            param.array[...] = theirs[name].array.astype(param.dtype)
    links = dict(source.namedlinks())
    for name, link in target.namedlinks():
        if hasattr(link, 'avg_mean') and hasattr(links.get(name), 'avg_mean'):
            link.avg_mean[...] = links[name].avg_mean
            link.avg_var[...] = links[name].avg_var
    if new_head:
        return ('{}: a {}-class model; this run has {} classes, so its head '
                '(fc) starts anew'.format(path, theirs['/fc/W'].shape[0],
                                          mine['/fc/W'].shape[0]))
    return None

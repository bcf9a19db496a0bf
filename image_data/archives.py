"""Index image archives for training in place (``python -m
image_data.archives``).

    python -m image_data.archives ILSVRC2012_img_train.tar \\
        ILSVRC2012_img_val.tar ILSVRC2012_devkit_t12.tar.gz --out DIR

reads the archives' headers (never an image) and writes ``DIR/train.index``
and ``DIR/val.index`` for ``train_imagenet.py DIR/train.index
DIR/val.index``, the same records as list files (``train.txt``,
``val.txt``: ``name label``) and ``classes.txt`` (``label WNID words``).
Three kinds of archive are read (docs/imagenet_archives.md):

- ImageNet as distributed: a training tar of one tar per class
  (``<WNID>.tar``), a flat validation tar and the devkit, whose meta.mat
  and ground truth give the standard labels
  (:mod:`image_data.imagenet_devkit`);
- an uncompressed tar of class folders (``[prefix/]<class>/<image>``), for
  training and, optionally, validation: labels are the sorted class names;
- MXNet RecordIO files (``train.rec [val.rec]``), labels from the records.

Records are in the order the trainer reads extracted class folders (label,
then file name) and named as the extracted files would be
(``<class>/<file>``), so that training from an index is training from the
same images extracted, bit for bit.
"""
import argparse
import os
import sys
import time

import numpy

from largebatch import input_files
from largebatch import outputs
from largebatch.errors import InputError
from image_data import imagenet_devkit
from image_data import index_file
from image_data import recordio
from image_data import tar_members
from image_data.archive_members import Archive
from image_data.archive_members import crc32c
from image_data.image_list import IMAGE_EXTENSIONS

#: What the indexer writes in ``--out``.
OUTPUTS = ('train.index', 'val.index', 'train.txt', 'val.txt', 'classes.txt')
#: Seconds between two progress lines.
PROGRESS_INTERVAL = 10


class Progress(object):
    """Counts headers read and prints a line every ``interval`` seconds,
    and the rate at the end."""

    def __init__(self, out=sys.stderr, interval=PROGRESS_INTERVAL):
        self.out, self.interval = out, interval
        self.start = self.last = time.monotonic()
        self.headers = 0

    def count(self, n, what):
        self.headers += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            print('  {}: {:,} headers, {:,.0f} a second'.format(
                what, self.headers, self.rate()), file=self.out, flush=True)

    def rate(self):
        return self.headers / max(time.monotonic() - self.start, 1e-9)


class Records(object):
    """The records of one index: names, labels, starts, lengths and
    CRC32C, sorted by (label, name)."""

    def __init__(self, archive, kind, classes, rows):
        rows = sorted(rows, key=lambda row: (row[1], row[0]))
        self.archive, self.kind, self.classes = archive, kind, classes
        self.names = [row[0] for row in rows]
        self.labels = numpy.array([row[1] for row in rows], numpy.int32)
        self.starts = numpy.array([row[2] for row in rows], numpy.int64)
        self.lengths = numpy.array([row[3] for row in rows], numpy.int64)
        self.crc32c = numpy.zeros(len(rows), numpy.uint32)

    def fill_checksums(self, progress):
        """Read every image once for its CRC32C."""
        with open(self.archive.path, 'rb') as f:
            for i, (start, length) in enumerate(zip(self.starts,
                                                    self.lengths)):
                self.crc32c[i] = crc32c(os.pread(f.fileno(), int(length),
                                                 int(start)))
                progress.count(1, 'checksums')

    def write(self, out, stem):
        """``out/stem.index`` and ``out/stem.txt``."""
        with _output(out, stem + '.index') as f:
            index_file.write_index(f, self.kind, self.archive, self.classes,
                                   self.names, self.labels, self.starts,
                                   self.lengths, self.crc32c)
        with _output(out, stem + '.txt') as f:
            f.writelines('{} {}\n'.format(name, label).encode('utf-8')
                         for name, label in zip(self.names, self.labels))


def _archive(path, f, checksums):
    status = os.fstat(f.fileno())
    return Archive(os.path.abspath(path), status.st_size, status.st_mtime_ns,
                   checksums)


def _is_image(name):
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _unique(path, names):
    seen = set()
    for name in names:
        if name in seen:
            raise InputError('archive {}: member {} appears twice'.format(
                path, name))
        seen.add(name)


def _class_tars(path, f, progress):
    """``{WNID: [members]}`` of ImageNet's training tar of class tars."""
    classes = {}
    for member in tar_members.members(path, f):
        stem, extension = os.path.splitext(os.path.basename(member.name))
        if extension != '.tar':
            raise InputError('archive {}: member {} is not a class tar '
                             '(<WNID>.tar), as the others are'.format(
                                 path, member.name))
        inner = '{}:{}'.format(path, member.name)
        classes[stem] = [m for m in tar_members.members(
            inner, f, member.start, member.length) if _is_image(m.name)]
        _unique(inner, [m.name for m in classes[stem]])
        progress.count(len(classes[stem]) + 1, 'train')
    return classes


def _class_folders(path, f, progress):
    """``{class: [members named <file>]}`` of a tar of class folders."""
    classes, prefix = {}, None
    for member in tar_members.members(path, f):
        progress.count(1, os.path.basename(path))
        if not _is_image(member.name):
            continue
        parts = member.name.split('/')
        if len(parts) < 2 or (prefix is not None and parts[:-2] != prefix):
            raise InputError(
                'archive {}: member {} is not in a class folder beside the '
                'others ({}<class>/<image>)'.format(
                    path, member.name, ''.join(p + '/' for p in prefix or [])))
        prefix = parts[:-2]
        classes.setdefault(parts[-2], []).append(
            member._replace(name=parts[-1]))
    for name, members in classes.items():
        _unique(path, [name + '/' + m.name for m in members])
    return classes


def index_imagenet(train, val, devkit, checksums, progress):
    """The training and validation :class:`Records` of ImageNet's
    archives, with the devkit's :class:`~image_data.imagenet_devkit.Devkit`."""
    input_files.check_regular(devkit, 'devkit')
    kit = imagenet_devkit.read_devkit(devkit)
    with _open_archive(train) as f:
        archive = _archive(train, f, checksums)
        classes = _class_tars(train, f, progress)
    if sorted(classes) != kit.wnids:
        missing = sorted(set(kit.wnids) - set(classes))
        extra = sorted(set(classes) - set(kit.wnids))
        raise InputError(
            'devkit {} lists {} classes, the training archive {} holds {} '
            'class tars ({})'.format(devkit, len(kit.wnids), train,
                                     len(classes), 'first missing: {}'.format(
                                         missing[0]) if missing else
                                     'first not in the devkit: {}'.format(
                                         extra[0])))
    train_records = Records(archive, 'tar', kit.wnids, [
        (wnid + '/' + m.name, label, m.start, m.length)
        for label, wnid in enumerate(kit.wnids) for m in classes[wnid]])
    with _open_archive(val) as f:
        val_archive = _archive(val, f, checksums)
        images = [m for m in tar_members.members(val, f) if _is_image(m.name)]
        progress.count(len(images), 'val')
    images.sort(key=lambda m: m.name)
    _unique(val, [m.name for m in images])
    if len(images) != len(kit.val_ids):
        raise InputError('validation archive {} holds {} images, the '
                         'devkit\'s ground truth labels {}'.format(
                             val, len(images), len(kit.val_ids)))
    val_records = Records(val_archive, 'tar', kit.wnids, [
        (kit.wnids[label] + '/' + os.path.basename(m.name), label, m.start,
         m.length) for m, label in zip(images, kit.val_labels())])
    return train_records, val_records, kit


def index_class_folders(train, val, checksums, progress):
    """The :class:`Records` of tars of class folders (``val`` may be
    None); labels are the sorted training class names."""
    sets = []
    for path in (train, val) if val else (train,):
        with _open_archive(path) as f:
            sets.append((_archive(path, f, checksums),
                         _class_folders(path, f, progress)))
    names = sorted(sets[0][1])
    label_of = {name: label for label, name in enumerate(names)}
    records = []
    for path, (archive, classes) in zip((train, val), sets):
        unknown = sorted(set(classes) - set(names))
        if unknown:
            raise InputError('archive {}: class folder {} is not among the '
                             'training classes'.format(path, unknown[0]))
        records.append(Records(archive, 'tar', names, [
            (name + '/' + m.name, label_of[name], m.start, m.length)
            for name, members in classes.items() for m in members]))
    return records


def index_recordio(train, val, checksums, progress):
    """The :class:`Records` of RecordIO files (``val`` may be None), in
    file order, named by record id; classes are the labels' numbers."""
    sets = []
    for path in (train, val) if val else (train,):
        with _open_archive(path) as f:
            rows = []
            for record in recordio.records(path, f):
                rows.append(('{:09d}'.format(record.id), record.label,
                             record.start, record.length))
                progress.count(1, os.path.basename(path))
            sets.append(Records(_archive(path, f, checksums), 'recordio',
                                [], rows))
    n_class = 1 + max(int(s.labels.max()) for s in sets if len(s.labels))
    for records in sets:
        records.classes = [str(label) for label in range(n_class)]
    return sets


def _open_archive(path):
    input_files.check_regular(path, 'archive')
    f = open(path, 'rb')
    if not path.endswith('.rec'):
        tar_members.check_uncompressed(path, f)
    return f


def _is_tar_of_tars(path):
    with _open_archive(path) as f:
        for member in tar_members.members(path, f):
            return member.name.endswith('.tar')
    raise InputError('archive {}: holds no file'.format(path))


def _output(out, name):
    """A new binary file ``out/name``, written beside under a temporary name
    and renamed into place when complete (:mod:`largebatch.outputs`;
    :func:`_check_out` refused what was there unless ``--force``)."""
    return outputs.open_replacing(os.path.join(out, name), force=True)


def _check_out(out, force):
    """Make ``out``, or refuse outputs already there unless ``force``."""
    if os.path.lexists(out) and not os.path.isdir(out):
        raise InputError('--out {}: not a directory'.format(out))
    os.makedirs(out, exist_ok=True)
    there = [name for name in OUTPUTS
             if os.path.lexists(os.path.join(out, name))]
    if there and not force:
        raise InputError('--out {}: holds {} already (--force replaces it)'
                         .format(out, there[0]))


def index_archives(train, val, devkit, out, checksums=False, force=False,
                   progress=None):
    """Index the archives into ``out``; returns the training and
    validation :class:`Records` (validation None without ``val``)."""
    progress = progress or Progress()
    _check_out(out, force)
    if train.endswith('.rec'):
        kind, sets, words = 'recordio', index_recordio(
            train, val, checksums, progress), None
    elif _is_tar_of_tars(train):
        if not (val and devkit):
            raise InputError('archive {}: ImageNet\'s training archive (a tar '
                             'of class tars) needs the validation archive and '
                             'the devkit too'.format(train))
        train_records, val_records, kit = index_imagenet(
            train, val, devkit, checksums, progress)
        kind, sets, words = 'ImageNet', [train_records, val_records], \
            kit.words
    else:
        if devkit:
            raise InputError('devkit {}: a devkit labels ImageNet\'s archives '
                             'only; {} is a tar of class folders'.format(
                                 devkit, train))
        kind, sets, words = 'class folders', index_class_folders(
            train, val, checksums, progress), None
    if checksums:
        for records in sets:
            records.fill_checksums(progress)
    for stem, records in zip(('train', 'val'), sets):
        records.write(out, stem)
    classes = sets[0].classes
    with _output(out, 'classes.txt') as f:
        f.writelines('{} {}{}\n'.format(
            label, name, ' ' + words[label] if words else '').encode('utf-8')
            for label, name in enumerate(classes))
    return kind, sets


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m image_data.archives',
        description='Index image archives (ImageNet\'s tars and devkit, a '
                    'tar of class folders, or RecordIO files) for training '
                    'in place.')
    parser.add_argument('train', help='ILSVRC2012_img_train.tar, a tar of '
                        'class folders, or a .rec file')
    parser.add_argument('val', nargs='?', help='ILSVRC2012_img_val.tar, a '
                        'tar of class folders, or a .rec file')
    parser.add_argument('devkit', nargs='?',
                        help='ILSVRC2012_devkit_t12.tar.gz (ImageNet only)')
    parser.add_argument('--out', required=True,
                        help='directory to write the indexes to')
    parser.add_argument('--checksums', action='store_true',
                        help='read every image once and record its CRC32C, '
                             'checked at every read in training')
    parser.add_argument('--force', action='store_true',
                        help='replace the indexes already in --out')
    args = parser.parse_args(argv)
    progress = Progress()
    try:
        kind, sets = index_archives(args.train, args.val, args.devkit,
                                    args.out, args.checksums, args.force,
                                    progress)
    except InputError as e:
        parser.exit(2, 'image_data.archives: {}\n'.format(e))
    seconds = time.monotonic() - progress.start
    for stem, records in zip(('train', 'val'), sets):
        print('{}: {:,} images in {} classes from {}'.format(
            os.path.join(args.out, stem + '.index'), len(records.names),
            len(records.classes), records.archive.path))
    print('{}: {:,} headers{} in {:.1f} s ({:,.0f} a second)'.format(
        kind, progress.headers, ' and checksums' if args.checksums else '',
        seconds, progress.rate()))


if __name__ == '__main__':
    main()

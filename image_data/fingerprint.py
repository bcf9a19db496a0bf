"""A training set's fingerprint: its size and a hash of what it holds.

A snapshot records it (``imagenet_job.snapshots.RunConfiguration``), so
that a run is not continued on another training set without a word: the
global sample order and the epoch counter depend on the set.
"""
import hashlib

import numpy


def fingerprint(dataset):
    """``'N images, sha256 XXXXXXXXXXXXXXXX'``: the number of examples and
    a hash of their relative paths and labels (an index of files or of
    archive members: an archive's index and its extracted class folders are
    the same set), or of their pixels and labels (a decoded set)."""
    digest = hashlib.sha256()
    if hasattr(dataset, 'segment'):  # ImageIndex: offsets, labels, paths
        segment = dataset.segment
        for buffer in (segment.offsets, segment.labels, segment.blob):
            digest.update(numpy.ascontiguousarray(buffer).tobytes())
    else:
        digest.update(numpy.ascontiguousarray(dataset.labels).tobytes())
        digest.update(numpy.ascontiguousarray(dataset.images).tobytes())
    return '{} images, sha256 {}'.format(len(dataset), digest.hexdigest()[:16])

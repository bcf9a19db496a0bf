"""ILSVRC2012's classes and validation labels, from its development kit.

The devkit (``ILSVRC2012_devkit_t12.tar.gz``) holds ``data/meta.mat``, a
MATLAB struct array of WordNet synsets (``ILSVRC2012_ID``, ``WNID``,
``words``, ``num_children``, ...), and
``data/ILSVRC2012_validation_ground_truth.txt``, one ILSVRC2012_ID a line
for the validation images in file-name order. The classes are the leaf
synsets (``num_children == 0``); their labels are the standard ones that
torchvision, Chainer's and the Caffe lists use: the index of the WNID among
the sorted WNIDs, which is not the ILSVRC2012_ID order.
"""
import dataclasses
import io
import tarfile

from largebatch.errors import InputError

META = 'data/meta.mat'
GROUND_TRUTH = 'data/ILSVRC2012_validation_ground_truth.txt'
#: The most bytes read of either file (the real ones: 2 MB and 0.2 MB).
MEMBER_LIMIT = 64 << 20
_FIELDS = ('ILSVRC2012_ID', 'WNID', 'words', 'num_children')


@dataclasses.dataclass
class Devkit(object):
    """``wnids``: the classes' WNIDs, sorted (label = position);
    ``words``: each class's words, in the same order; ``val_ids``: the
    ILSVRC2012_ID of each validation image, in file-name order, and
    ``wnid_of`` the leaf synsets' ``{ILSVRC2012_ID: WNID}``."""
    path: str
    wnids: list
    words: list
    val_ids: list
    wnid_of: dict

    def val_labels(self):
        """The label of each validation image, in file-name order."""
        label_of = {wnid: label for label, wnid in enumerate(self.wnids)}
        labels = []
        for lineno, ilsvrc_id in enumerate(self.val_ids, 1):
            if ilsvrc_id not in self.wnid_of:
                raise InputError('devkit {}: {}:{}: {} is not the '
                                 'ILSVRC2012_ID of a class'.format(
                                     self.path, GROUND_TRUTH, lineno,
                                     ilsvrc_id))
            labels.append(label_of[self.wnid_of[ilsvrc_id]])
        return labels


def read_devkit(path):
    """The :class:`Devkit` of the devkit archive at ``path`` (any tar,
    compressed or not); :class:`InputError` naming the file and what is
    wrong."""
    meta, truth = _read_members(path)
    wnid_of, words = _leaf_synsets(path, meta)
    wnids = sorted(wnid_of.values())
    val_ids = []
    for lineno, line in enumerate(truth.splitlines(), 1):
        try:
            val_ids.append(int(line))
        except ValueError:
            raise InputError('devkit {}: {}:{}: {!r} is not an '
                             'ILSVRC2012_ID'.format(path, GROUND_TRUTH,
                                                    lineno, line[:40]))
    return Devkit(path, wnids, [words[w] for w in wnids], val_ids, wnid_of)


def _read_members(path):
    """The bytes of meta.mat and of the ground truth's text."""
    found = {}
    try:
        with tarfile.open(path, 'r:*') as tar:
            for info in tar:
                for wanted in (META, GROUND_TRUTH):
                    if info.isreg() and (info.name == wanted or
                                         info.name.endswith('/' + wanted)):
                        if info.size > MEMBER_LIMIT:
                            raise InputError(
                                'devkit {}: {} holds {} bytes, more than a '
                                'devkit\'s'.format(path, info.name,
                                                   info.size))
                        found[wanted] = tar.extractfile(info).read()
    except (tarfile.TarError, OSError, EOFError) as e:
        raise InputError('devkit {}: not a readable tar ({})'.format(path, e))
    for wanted in (META, GROUND_TRUTH):
        if wanted not in found:
            raise InputError('devkit {}: holds no {} (expected ILSVRC2012\'s '
                             'devkit, ILSVRC2012_devkit_t12.tar.gz)'.format(
                                 path, wanted))
    try:
        truth = found[GROUND_TRUTH].decode('ascii')
    except UnicodeDecodeError:
        raise InputError('devkit {}: {} is not ASCII text'.format(
            path, GROUND_TRUTH))
    return found[META], truth


def _leaf_synsets(path, meta):
    """``({ILSVRC2012_ID: WNID}, {WNID: words})`` of the leaf synsets."""
    from scipy import io as matlab  # the indexer alone reads MATLAB files
    try:
        synsets = matlab.loadmat(io.BytesIO(meta), squeeze_me=True)['synsets']
        columns = [list(synsets[field].ravel()) for field in _FIELDS]
    except Exception as e:  # scipy's errors have no common base class
        raise InputError('devkit {}: {} is not the synsets struct of '
                         'ILSVRC2012 ({}: {})'.format(
                             path, META, type(e).__name__, e))
    ids_to_wnid, words = {}, {}
    for ilsvrc_id, wnid, word, children in zip(*columns):
        if int(children) == 0:
            ids_to_wnid[int(ilsvrc_id)] = str(wnid)
            words[str(wnid)] = str(word)
    if not ids_to_wnid or len(words) != len(ids_to_wnid):
        raise InputError('devkit {}: {} lists {} leaf synsets with {} '
                         'distinct WNIDs'.format(path, META, len(ids_to_wnid),
                                                 len(words)))
    return ids_to_wnid, words

import gc
import glob
import multiprocessing
import os
import pickle
import subprocess
import sys

import numpy
import pytest

from conftest import REPO
from image_data.image_index import ImageIndex
from image_data.image_index import SEGMENT_PREFIX
from image_data.image_index import segment_prefix

PAIRS = [('n01/a.JPEG', 3), ('n01/b.JPEG', 0), ('n02/\u00e9t\u00e9.png', 7),
         (os.fsdecode(b'n02/raw\xff.jpg'), 2), ('c.jpg', 1)]


def segments(pid=None):
    return glob.glob('/dev/shm/{}*'.format(segment_prefix(pid or os.getpid())))


@pytest.fixture(autouse=True)
def no_leaked_segments():
    """Every test leaves /dev/shm as it found it."""
    yield
    gc.collect()
    assert segments() == []


def make_index():
    return ImageIndex('/data/train', PAIRS)


def expected(pairs):
    return [(os.path.join('/data/train', p), l) for p, l in pairs]


def test_round_trip_gives_joined_paths_and_int_labels():
    index = make_index()
    assert len(index) == 5
    assert list(index) == expected(PAIRS)
    assert type(index[0][1]) is int
    assert index[-1] == expected(PAIRS)[-1]
    assert index.labels.dtype == numpy.int32
    assert index.labels.tolist() == [l for _, l in PAIRS]
    with pytest.raises(IndexError):
        index[5]


def test_arrays_are_compact_and_read_only():
    index = make_index()
    blob = sum(len(os.fsencode(p)) for p, _ in PAIRS)
    assert index.nbytes == 8 * 6 + 4 * 5 + blob
    for buf in index.buffers():
        assert not buf.flags.writeable


@pytest.mark.parametrize('key', [slice(1, 4), slice(None, 2), slice(-2, None),
                                 slice(3, 1), slice(1, 2, 5), slice(9, 12)])
def test_slices_are_views_of_the_same_segment(key):
    index = make_index()
    view = index[key]
    assert list(view) == expected(PAIRS)[key]
    assert view.labels.tolist() == [l for _, l in PAIRS[key]]
    assert view.segment is index.segment
    assert list(view[1:]) == expected(PAIRS)[key][1:]


def test_slice_with_a_step_is_refused():
    index = make_index()
    with pytest.raises(ValueError, match='step 1'):
        index[::2]


def test_pickle_attaches_by_name():
    index = make_index()
    data = pickle.dumps(index[1:3])
    assert len(data) < 300
    attached = pickle.loads(data)
    assert attached.segment.name == index.segment.name
    assert list(attached) == expected(PAIRS)[1:3]


def read_in_child(index):
    with open('/proc/self/maps') as f:
        mapped = '/dev/shm/' + index.segment.name in f.read()
    return list(index), mapped


@pytest.mark.parametrize('method', ['forkserver', 'spawn'])
def test_loader_process_reads_the_owners_pages(method):
    index = make_index()
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(1) as pool:
        pairs, mapped = pool.apply(read_in_child, (index[2:],))
    assert pairs == expected(PAIRS)[2:]
    assert mapped  # the segment is mapped, not copied


def test_owner_unlinks_when_collected_and_attached_copies_still_read():
    index = make_index()
    attached = pickle.loads(pickle.dumps(index))
    assert len(segments()) == 1
    del index
    gc.collect()
    assert segments() == []
    assert list(attached) == expected(PAIRS)


def test_allocated_index_is_filled_through_its_buffers():
    index = make_index()
    copy = ImageIndex.allocate(*index.layout())
    for src, dst in zip(index.buffers(), copy.buffers()):
        dst[...] = src
    copy.freeze()
    assert list(copy) == list(index)
    assert copy.segment.name != index.segment.name


def test_empty_index():
    empty = ImageIndex('.', [])
    assert len(empty) == 0 and list(empty) == []


def test_exit_without_cleanup_leaves_no_segment():
    code = '\n'.join([
        'import largebatch.chainer_compat',
        'import multiprocessing, pickle',
        # the forkserver's children import Chainer: chainer_compat first
        'multiprocessing.set_forkserver_preload('
        '["largebatch.chainer_compat"])',
        'from image_data.image_index import ImageIndex',
        'index = ImageIndex("/r", [("a.jpg", 1)] * 1000)',
        'ctx = multiprocessing.get_context("forkserver")',
        'with ctx.Pool(2) as pool:',
        '    assert pool.map(len, [index, index[1:]]) == [1000, 999]',
        'print(index.segment.name)'])
    proc = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(SEGMENT_PREFIX)
    assert not os.path.exists('/dev/shm/' + proc.stdout.strip())
    assert 'leaked' not in proc.stderr


def test_segments_of_dead_processes_are_removed_by_the_next_index(
        tmp_path):
    dead = subprocess.run([sys.executable, '-c', 'import os; '
                           'print(os.getpid())'], capture_output=True,
                          text=True, check=True)
    stale = '/dev/shm/{}feed'.format(segment_prefix(dead.stdout.strip()))
    mine = '/dev/shm/{}beef'.format(segment_prefix(os.getpid()))
    # A process of another PID namespace, whose ids this one cannot check.
    foreign = '/dev/shm/{}1_{}_cafe'.format(
        SEGMENT_PREFIX, dead.stdout.strip())
    for path in (stale, mine, foreign):
        with open(path, 'wb') as f:
            f.write(b'x')
    try:
        ImageIndex('.', [('a.jpg', 1)])
        assert not os.path.exists(stale)
        assert os.path.exists(mine)  # this process is alive
        assert os.path.exists(foreign)
    finally:
        for path in (stale, mine, foreign):
            if os.path.exists(path):
                os.remove(path)

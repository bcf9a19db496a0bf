"""Training and evaluating straight from ImageNet's archives, on archives in
the official layout: the same losses as from the extracted folders, bit for
bit; one open of each archive per process, and none of an image file."""
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

import official_archives
from conftest import mpi_command
from conftest import REPO
from conftest import run_mpi
from image_data import archives

FLAGS = ['--iterations', '3', '--log-interval', '1', '--batchsize', '8',
         '--val_batchsize', '8',
         '--crop-size', '32', '--width', '0.25', '--loaderjob', '1']


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """The official archives (per class 24 training and 4 validation
    images), their index and their extraction."""
    root = tmp_path_factory.mktemp('imagenet')
    paths = official_archives.make(root, per_class=24)
    archives.index_archives(*paths, str(root / 'index'),
                            progress=archives.Progress(io.StringIO()))
    folders = official_archives.extract(*paths, str(root / 'extracted'))
    return {'archives': paths, 'index': [str(root / 'index' / name) for name
                                         in ('train.index', 'val.index')],
            'folders': list(folders)}


def losses(out):
    with open(os.path.join(out, 'log')) as f:
        return [(e['main/loss'], e.get('validation/main/loss'))
                for e in json.load(f)]


def test_three_iterations_from_the_index_are_those_from_the_folders(
        data, tmp_path):
    runs = {}
    for form in ('index', 'folders'):
        out = str(tmp_path / form)
        run_mpi(2, ['train_imagenet.py'] + data[form] + FLAGS +
                ['--out', out])
        runs[form] = losses(out)
    assert len(runs['index']) == 3
    assert runs['index'] == runs['folders']


def successful_opens(trace):
    """``(pid, path)`` of each open that succeeded in an ``strace -f``
    trace, also where strace split the call around another thread's
    (``<unfinished ...>``, then ``<... openat resumed>``)."""
    pending = {}
    with open(trace) as f:
        for line in f:
            call = re.match(r'(\d+) +open(?:at)?\(.*?"([^"]+)"(.*)$', line)
            if call:
                pid, path, rest = call.groups()
                if rest.endswith('<unfinished ...>'):
                    pending[pid] = path
                elif re.search(r'= \d+$', rest):
                    yield pid, path
                continue
            resumed = re.match(r'(\d+) +<\.\.\. open(?:at)? resumed>.*= \d+$',
                               line)
            if resumed and resumed.group(1) in pending:
                yield resumed.group(1), pending.pop(resumed.group(1))


def test_a_run_opens_no_image_and_each_archive_once_a_process(data,
                                                              tmp_path):
    if not shutil.which('strace'):
        pytest.skip('strace is not installed (.ci/run installs it)')
    trace = str(tmp_path / 'trace')
    subprocess.run(
        ['strace', '-f', '-qq', '-e', 'trace=open,openat', '-o', trace] +
        mpi_command(1, ['train_imagenet.py'] + data['index'] + FLAGS +
                    ['--out', str(tmp_path / 'out')]),
        cwd=REPO, check=True, capture_output=True, timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO))
    opened = {}
    for pid, path in successful_opens(trace):
        opened.setdefault(path, set()).add(pid)
        opened.setdefault((path, 'count'), []).append(1)
    assert not [p for p in opened if isinstance(p, str) and
                p.lower().endswith(('.jpeg', '.jpg'))]
    for archive in data['archives'][:2]:
        # by the loader process that reads it (training's, validation's),
        # once
        assert len(opened[archive]) == 1
        assert len(opened[(archive, 'count')]) == 1


def test_eval_scores_the_index_as_the_folders(data, tmp_path):
    out = str(tmp_path / 'out')
    run_mpi(1, ['train_imagenet.py'] + data['index'] + FLAGS +
            ['--out', out])
    scores = []
    for val in (data['index'][1], data['folders'][1]):
        proc = subprocess.run(
            [sys.executable, 'eval_imagenet.py', os.path.join(out,
                                                              'model.npz'),
             val], cwd=REPO, capture_output=True, text=True, timeout=300,
            env=dict(os.environ, PYTHONPATH=REPO))
        assert proc.returncode == 0, proc.stderr
        scores.append(proc.stdout.strip().splitlines()[-1].split(' of ')[0])
    assert scores[0].startswith('validation top-1 ')
    assert scores[0] == scores[1]


def error_line(*args):
    proc = subprocess.run(
        [sys.executable, 'train_imagenet.py'] + list(args) + FLAGS,
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr
    return lines[0]


def test_an_archive_changed_since_it_was_indexed_ends_in_one_line(
        data, tmp_path):
    index = shutil.copytree(os.path.dirname(data['index'][0]),
                            str(tmp_path / 'index'))
    recorded = data['archives'][0]
    # the archive copied beside the index (a new mtime), its recorded
    # folder gone
    train = shutil.copy(recorded, index)
    gone = os.path.join('/' + 'g' * (len(os.path.dirname(recorded)) - 1),
                        os.path.basename(recorded))
    with open(os.path.join(index, 'train.index'), 'rb') as f:
        raw = f.read()
    with open(os.path.join(index, 'train.index'), 'wb') as f:
        f.write(raw.replace(recorded.encode(), gone.encode()))
    msg = error_line(os.path.join(index, 'train.index'), data['index'][1],
                     '--out', str(tmp_path / 'out'))
    assert 'changed since it was indexed' in msg and train in msg
    assert not os.path.exists(str(tmp_path / 'out'))


def test_validation_index_of_other_classes_ends_in_one_line(data, tmp_path):
    val = str(tmp_path / 'val.tar')
    with tarfile.open(val, 'w') as tar:
        for wnid in sorted(official_archives.WNIDS)[:3]:
            tar.add(os.path.join(data['folders'][1], wnid), arcname=wnid)
    archives.index_archives(val, None, None, str(tmp_path / 'idx'),
                            progress=archives.Progress(io.StringIO()))
    msg = error_line(data['index'][0], str(tmp_path / 'idx' / 'train.index'),
                     '--out', str(tmp_path / 'out'))
    assert msg.endswith('its 3 classes are not the training set\'s 5')


@pytest.fixture
def corrupted(data, tmp_path):
    """An index with checksums of a copy of the training archive in which
    one image's bytes changed after indexing (its mtime kept)."""
    train = shutil.copy(data['archives'][0], str(tmp_path))
    out = str(tmp_path / 'index')
    archives.index_archives(train, data['archives'][1], data['archives'][2],
                            out, checksums=True,
                            progress=archives.Progress(io.StringIO()))
    from image_data import index_file
    index, _ = index_file.read_index(os.path.join(out, 'train.index'))
    member = index[0][0]
    status = os.stat(train)
    with open(train, 'r+b') as f:
        os.pwrite(f.fileno(), b'\0' * 16, member.start + member.length // 2)
    os.utime(train, ns=(status.st_atime_ns, status.st_mtime_ns))
    return [os.path.join(out, 'train.index'),
            os.path.join(out, 'val.index')], str(member)


#: One epoch (15 iterations on one process): every image is read.
EPOCH = FLAGS[2:] + ['--epoch', '1']


def test_a_crc_mismatch_in_training_ends_in_one_line(corrupted, tmp_path):
    index, member = corrupted
    proc = subprocess.run(
        [sys.executable, 'train_imagenet.py'] + index + EPOCH +
        ['--out', str(tmp_path / 'out')], cwd=REPO, capture_output=True,
        text=True, timeout=300, env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr
    assert 'image {}: CRC32C '.format(member) in lines[0]


def test_a_crc_mismatch_is_skipped_and_counted_when_asked(corrupted,
                                                          tmp_path):
    index, member = corrupted
    out = str(tmp_path / 'out')
    run_mpi(1, ['train_imagenet.py'] + index + EPOCH +
            ['--out', out, '--skip-bad-images'])
    with open(os.path.join(out, 'log')) as f:
        assert max(e.get('skipped_images', 0) for e in json.load(f)) == 1


def test_a_run_on_the_folders_resumes_from_the_index(data, tmp_path):
    out = str(tmp_path / 'out')
    run_mpi(2, ['train_imagenet.py'] + data['folders'] + FLAGS +
            ['--out', out, '--iterations', '2'])
    proc = run_mpi(2, ['train_imagenet.py'] + data['index'] + FLAGS +
                   ['--out', out, '--resume', 'auto'])
    assert 'resuming from' in proc.stdout
    straight = str(tmp_path / 'straight')
    run_mpi(2, ['train_imagenet.py'] + data['folders'] + FLAGS +
            ['--out', straight])
    assert losses(out)[-1] == losses(straight)[-1]

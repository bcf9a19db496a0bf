"""The indexer of image archives, on archives in ImageNet's official layout."""
import io
import os
import tarfile

import numpy
import pytest

import official_archives
from largebatch.errors import InputError
from image_data import archives
from image_data import decoding
from image_data import image_list
from image_data import index_file
from image_data import make_imagenet_archives


@pytest.fixture(scope='module')
def official(tmp_path_factory):
    return official_archives.make(tmp_path_factory.mktemp('archives'))


@pytest.fixture(scope='module')
def indexed(official, tmp_path_factory):
    out = str(tmp_path_factory.mktemp('index'))
    archives.index_archives(*official, out, checksums=True,
                            progress=archives.Progress(io.StringIO()))
    return out


@pytest.fixture(scope='module')
def extracted(official, tmp_path_factory):
    return official_archives.extract(
        *official, str(tmp_path_factory.mktemp('extracted')))


def test_labels_are_the_standard_numbering(official, indexed):
    wnids, truth, wnid_of = official_archives.standard_labels(official[2])
    assert wnids == sorted(official_archives.WNIDS)
    index, classes = index_file.read_index(os.path.join(indexed,
                                                        'val.index'))
    assert classes == wnids
    expected = {}
    with tarfile.open(official[1]) as tar:
        for name, ilsvrc_id in zip(sorted(tar.getnames()), truth):
            expected[name] = wnids.index(wnid_of[int(ilsvrc_id)])
    got = {member.name.split('/')[1]: label for member, label in index}
    assert got == expected
    # the ILSVRC2012_IDs are not in the sorted-WNID order
    assert [wnid_of[i] for i in sorted(wnid_of)] != wnids
    with open(os.path.join(indexed, 'classes.txt')) as f:
        assert f.readline().split()[:2] == ['0', wnids[0]]


@pytest.mark.parametrize('stem', ['train', 'val'])
def test_records_are_the_extracted_folders_in_reading_order(
        indexed, extracted, stem):
    folders = extracted[0] if stem == 'train' else extracted[1]
    from_files, names = image_list.read_class_folders(folders)
    from_archive, classes = index_file.read_index(
        os.path.join(indexed, stem + '.index'))
    assert classes == names
    assert len(from_archive) == len(from_files)
    for (member, label), (path, file_label) in zip(from_archive, from_files):
        assert os.path.relpath(path, folders) == member.name
        assert label == file_label
        with open(path, 'rb') as f:
            assert member.read() == f.read()
    with open(os.path.join(indexed, stem + '.txt')) as f:
        assert [line.split() for line in f] == [
            [os.path.relpath(p, folders), str(label)]
            for p, label in from_files]


def test_png_and_cmyk_named_jpeg_decode_as_their_files(indexed, extracted):
    index, _ = index_file.read_index(os.path.join(indexed, 'train.index'))
    decoded = 0
    for member, _ in index:
        path = os.path.join(extracted[0], member.name)
        with open(path, 'rb') as f:
            head = f.read(4)
        if head.startswith(b'\x89PNG') or b'Adobe' in open(path, 'rb').read():
            for decoder in ('pillow', 'simplejpeg'):
                numpy.testing.assert_array_equal(
                    decoding.load_rgb(member, 40, decoder),
                    decoding.load_rgb(path, 40, decoder))
            decoded += 1
    assert decoded == 2


def test_fingerprint_of_the_index_is_the_extracted_folders(
        indexed, extracted):
    from image_data.fingerprint import fingerprint
    from_files, _ = image_list.read_class_folders(extracted[0])
    from_archive, _ = index_file.read_index(os.path.join(indexed,
                                                         'train.index'))
    assert fingerprint(from_archive) == fingerprint(from_files)


def test_outputs_are_refused_unless_forced(official, indexed):
    with pytest.raises(InputError, match='holds train.index already'):
        archives.index_archives(*official, indexed)
    archives.index_archives(*official, indexed, force=True,
                            progress=archives.Progress(io.StringIO()))
    assert [name for name in os.listdir(indexed)
            if name.startswith('.')] == []


def test_forced_outputs_replace_a_link_and_never_a_fifo(official, tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    target = tmp_path / 'precious'
    target.write_text('keep me')
    os.symlink(str(target), str(out / 'train.index'))
    archives.index_archives(*official, str(out), force=True,
                            progress=archives.Progress(io.StringIO()))
    assert not (out / 'train.index').is_symlink()
    assert target.read_text() == 'keep me'
    os.remove(str(out / 'classes.txt'))
    os.mkfifo(str(out / 'classes.txt'))
    with pytest.raises(InputError, match='classes.txt is a FIFO; it is never '
                       'replaced'):
        archives.index_archives(*official, str(out), force=True,
                                progress=archives.Progress(io.StringIO()))


def test_make_archives_refuses_what_is_there_in_one_line(tmp_path, capsys):
    (tmp_path / make_imagenet_archives.VAL_TAR).write_bytes(b'mine')
    with pytest.raises(SystemExit) as info:
        make_imagenet_archives.main(['--out', str(tmp_path)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (
        'make_imagenet_archives: error: --out {} exists already\n'.format(
            tmp_path / make_imagenet_archives.VAL_TAR))
    assert os.listdir(str(tmp_path)) == [make_imagenet_archives.VAL_TAR]
    assert (tmp_path / make_imagenet_archives.VAL_TAR).read_bytes() == b'mine'


def rewrite_devkit(official, tmp_path, drop=None, meta=None):
    path = str(tmp_path / 'devkit.tar.gz')
    with tarfile.open(official[2]) as source, \
            tarfile.open(path, 'w:gz') as tar:
        for info in source:
            data = source.extractfile(info).read()
            if drop and info.name.endswith(drop):
                continue
            if meta is not None and info.name.endswith('meta.mat'):
                data = meta
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def index(tmp_path, train, val=None, devkit=None):
    archives.index_archives(train, val, devkit, str(tmp_path / 'out'),
                            progress=archives.Progress(io.StringIO()))


def test_devkit_without_meta_mat(official, tmp_path):
    devkit = rewrite_devkit(official, tmp_path, drop='meta.mat')
    with pytest.raises(InputError, match='holds no data/meta.mat'):
        index(tmp_path, official[0], official[1], devkit)


def test_devkit_with_another_class_count(official, tmp_path):
    ids = {w: i + 1 for i, w in enumerate(official_archives.WNIDS[:3])}
    devkit = rewrite_devkit(official, tmp_path,
                            meta=make_imagenet_archives._meta_mat(ids))
    with pytest.raises(InputError) as error:
        index(tmp_path, official[0], official[1], devkit)
    assert 'lists 3 classes' in str(error.value)
    assert 'holds 5 class tars' in str(error.value)


def test_devkit_whose_meta_is_not_synsets(official, tmp_path):
    devkit = rewrite_devkit(official, tmp_path, meta=b'MATLAB 5.0 nothing')
    with pytest.raises(InputError, match='is not the synsets struct'):
        index(tmp_path, official[0], official[1], devkit)


def test_truncated_training_archive(official, tmp_path):
    with open(official[0], 'rb') as f:
        data = f.read()
    for cut in (len(data) // 2, len(data) - 10240):
        truncated = tmp_path / 'train{}.tar'.format(cut)
        truncated.write_bytes(data[:cut])
        with pytest.raises(InputError, match='truncated|damaged'):
            index(tmp_path, str(truncated), official[1], official[2])


def test_compressed_archive(official, tmp_path):
    import gzip
    compressed = tmp_path / 'ILSVRC2012_img_val.tar.gz'
    with open(official[1], 'rb') as f:
        compressed.write_bytes(gzip.compress(f.read()))
    with pytest.raises(InputError, match=r'compressed \(gzip\)'):
        index(tmp_path, official[0], str(compressed), official[2])


def test_training_archive_without_devkit(official, tmp_path):
    with pytest.raises(InputError, match='needs the validation archive and '
                                         'the devkit'):
        index(tmp_path, official[0])


def test_ground_truth_of_another_count(official, tmp_path):
    with tarfile.open(official[1]) as tar:
        names = tar.getnames()
    val = str(tmp_path / 'val.tar')
    with tarfile.open(official[1]) as source, tarfile.open(val, 'w') as tar:
        for info in source.getmembers()[:-1]:
            tar.addfile(info, source.extractfile(info))
    with pytest.raises(InputError, match='holds {} images, the devkit\'s '
                       'ground truth labels {}'.format(len(names) - 1,
                                                       len(names))):
        index(tmp_path, official[0], val, official[2])


def test_link_member_is_refused(tmp_path):
    path = str(tmp_path / 'links.tar')
    with tarfile.open(path, 'w') as tar:
        info = tarfile.TarInfo('train/a/x.jpg')
        info.type, info.linkname = tarfile.SYMTYPE, '/etc/passwd'
        tar.addfile(info)
    with pytest.raises(InputError, match='train/a/x.jpg is a symbolic link'):
        index(tmp_path, path)


def class_folder_tar(path, files):
    with tarfile.open(path, 'w', format=tarfile.PAX_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tar_of_class_folders(tmp_path):
    long = 'd' * 120  # a pax header carries the name
    train = class_folder_tar(str(tmp_path / 'train.tar'), [
        ('train/b/2.jpg', b'B2'), ('train/a/1.JPEG', b'A1'),
        ('train/a/README', b'not an image'),
        ('train/{}/0.png'.format(long), b'L0'), ('train/a/0.jpg', b'A0')])
    val = class_folder_tar(str(tmp_path / 'val.tar'), [
        ('v/b/9.jpg', b'B9')])
    kind, (train_records, val_records) = archives.index_archives(
        train, val, None, str(tmp_path / 'out'),
        progress=archives.Progress(io.StringIO()))
    assert kind == 'class folders'
    assert train_records.classes == ['a', 'b', long]
    index, _ = index_file.read_index(str(tmp_path / 'out' / 'train.index'))
    assert [(m.name, label, m.read()) for m, label in index] == [
        ('a/0.jpg', 0, b'A0'), ('a/1.JPEG', 0, b'A1'), ('b/2.jpg', 1, b'B2'),
        (long + '/0.png', 2, b'L0')]
    index, _ = index_file.read_index(str(tmp_path / 'out' / 'val.index'))
    assert [(m.name, label) for m, label in index] == [('b/9.jpg', 1)]


def test_tar_of_class_folders_at_different_depths(tmp_path):
    train = class_folder_tar(str(tmp_path / 'train.tar'), [
        ('train/a/1.jpg', b'1'), ('other/train/b/2.jpg', b'2')])
    with pytest.raises(InputError, match='not in a class folder beside'):
        index(tmp_path, train)


def test_main_ends_bad_input_in_one_line(official, tmp_path, capsys):
    with pytest.raises(SystemExit) as end:
        archives.main([official[0], '--out', str(tmp_path / 'out')])
    assert end.value.code == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert err.startswith('image_data.archives: archive ')


def test_main_prints_counts_and_rate(official, tmp_path, capsys):
    archives.main(list(official) + ['--out', str(tmp_path / 'out')])
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith('train.index: 60 images in 5 classes from '
                           '{}'.format(official[0]))
    assert out[1].startswith(str(tmp_path / 'out' / 'val.index') +
                             ': 20 images')
    assert out[2].startswith('ImageNet: 85 headers in ')


@pytest.mark.parametrize('which', [0, 1, 2])
def test_fifos_and_missing_files_are_named_without_blocking(official,
                                                            tmp_path, which):
    paths = list(official)
    paths[which] = str(tmp_path / 'fifo')
    os.mkfifo(paths[which])
    with pytest.raises(InputError, match='fifo: a FIFO, not a regular file'):
        index(tmp_path, *paths)
    paths[which] = str(tmp_path / 'missing')
    with pytest.raises(InputError, match='missing: no such file'):
        index(tmp_path, *paths)

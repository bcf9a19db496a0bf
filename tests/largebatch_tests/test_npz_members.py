"""Every .npz member's and .npy file's header is read and checked before its
payload: a crafted file is one line naming the file and the member, and
never makes its reader allocate what it declares."""
import io
import os
import subprocess
import sys
import zipfile

import numpy
import pytest

from largebatch import npz_members
from largebatch.errors import InputError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def npy_bytes(array, version=None):
    out = io.BytesIO()
    numpy.lib.format.write_array(out, array, version=version,
                                 allow_pickle=True)
    return out.getvalue()


def header_bytes(shape, dtype='<f4'):
    """A version 1.0 .npy header declaring ``shape`` of ``dtype``."""
    out = io.BytesIO()
    numpy.lib.format.write_array_header_1_0(out, {
        'shape': shape, 'fortran_order': False, 'descr': dtype})
    return out.getvalue()


def write_npz(path, members, compression=zipfile.ZIP_STORED):
    """``members``: name -> the bytes of its .npy."""
    with zipfile.ZipFile(path, 'w', compression) as archive:
        for name, data in members.items():
            archive.writestr(name + '.npy', data)
    return path


def write_bomb(path, name, megabytes, noise=0, extra=None):
    """An .npz whose member ``name`` holds ``megabytes`` MiB of float32
    zeros, deflated, written a MiB at a time (``noise`` random bytes in each
    MiB lower its compression ratio), beside the members ``extra``."""
    chunk = numpy.zeros(1 << 20, numpy.uint8)
    rng = numpy.random.RandomState(0)
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as archive:
        for key, data in (extra or {}).items():
            archive.writestr(key + '.npy', data)
        with archive.open(name + '.npy', 'w', force_zip64=True) as member:
            member.write(header_bytes((megabytes << 18,)))
            for _ in range(megabytes):
                chunk[:noise] = rng.randint(0, 256, noise)
                member.write(chunk.tobytes())
    return path


def refusal(path, name=None):
    with pytest.raises(InputError) as e:
        if name is None:
            with npz_members.NpyFile(path) as npy:
                npy.read()
        else:
            with npz_members.NpzFile(path) as archive:
                archive[name]
    assert '\n' not in str(e.value)
    return str(e.value)


@pytest.mark.parametrize('version', [None, (1, 0), (2, 0), (3, 0)])
def test_members_of_every_format_version_are_read(tmp_path, version):
    array = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)
    path = write_npz(str(tmp_path / 'a.npz'), {
        'w': npy_bytes(array, version), 'names': npy_bytes(
            numpy.array(['\u00e9t\u00e9', 'b']), version)},
        zipfile.ZIP_DEFLATED)
    with npz_members.NpzFile(path) as archive:
        assert sorted(archive.files) == ['names', 'w'] and 'w' in archive
        assert archive.header('w').shape == (3, 4)
        assert (archive['w'] == array).all()
        assert archive['names'].tolist() == ['\u00e9t\u00e9', 'b']
        archive.verify()
    npy = str(tmp_path / 'a.npy')
    with open(npy, 'wb') as f:
        f.write(npy_bytes(array, version))
    with npz_members.NpyFile(npy) as f:
        assert f.header.dtype == numpy.float32
        assert (f.read() == array).all()


def test_a_deflate_bomb_is_refused_before_it_is_read(tmp_path):
    path = write_bomb(str(tmp_path / 'bomb.npz'), 'w', 64)
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo('w.npy')
    assert info.compress_size < 1 << 17
    assert refusal(path, 'w') == (
        '{}: w is compressed {:.0f} to one ({} bytes in {}), above the 1000 '
        'to one this reader takes'.format(
            path, info.file_size / info.compress_size, info.file_size,
            info.compress_size))


def test_a_tiny_member_may_compress_well(tmp_path):
    path = write_npz(str(tmp_path / 'a.npz'), {
        'b': npy_bytes(numpy.zeros(1 << 17, numpy.uint8))},
        zipfile.ZIP_DEFLATED)
    with npz_members.NpzFile(path) as archive:
        assert archive['b'].sum() == 0


@pytest.mark.parametrize('data, message', [
    (header_bytes((1 << 40, 1 << 20)) + b'\0' * 64,
     "w declares shape (1099511627776, 1048576) of float32 "
     "(4611686018427387904 bytes), the file holds 64 bytes after its "
     "header"),
    (npy_bytes(numpy.zeros(6, numpy.float32))[:-8],  # truncated
     'w declares shape (6,) of float32 (24 bytes), the file holds 16 bytes '
     'after its header'),
    (npy_bytes(numpy.zeros(2, numpy.float32)) + b'\0' * 8,
     'w declares shape (2,) of float32 (8 bytes), the file holds 16 bytes '
     'after its header'),
    (npy_bytes(numpy.array([1, 'a', None], dtype=object)),
     'w holds Python objects, which are never loaded'),
    (npy_bytes(numpy.zeros(2, [('a', 'i4'), ('b', 'f4')])),
     "w is of dtype [('a', '<i4'), ('b', '<f4')], expected numbers or "
     "strings"),
    (npy_bytes(numpy.zeros(2, 'datetime64[s]')),
     'w is of dtype datetime64[s], expected numbers or strings'),
    (header_bytes((-4,)), 'w: not a .npy array (shape (-4,))'),
    (b'\x93NUMPY\x04\x00' + header_bytes((2,))[8:],
     'w: not a .npy array (.npy format version 4.0, this code reads 1.0 to '
     '3.0)'),
    (b'PK\x03\x04 not an array', 'w: not a .npy array (the magic string is '
     'not correct; expected '),
    (b'\x93NUMPY\x02\x00' + b'\xff\xff\xff\x7f' + b'{' * 4096,
     'w: not a .npy array (EOF: reading array header, expected 2147483647 '
     'bytes got '),
])
def test_a_member_that_misdescribes_its_bytes_is_refused(tmp_path, data,
                                                         message):
    path = write_npz(str(tmp_path / 'a.npz'), {'w': data, 'ok': npy_bytes(
        numpy.zeros(3))})
    assert refusal(path, 'w').startswith('{}: {}'.format(path, message))
    npy = str(tmp_path / 'a.npy')
    with open(npy, 'wb') as f:
        f.write(data)
    assert refusal(npy).startswith(npy + message[1:])


def test_a_member_that_is_no_npy_is_refused(tmp_path):
    path = str(tmp_path / 'a.npz')
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('notes.txt', b'hello')
    assert refusal(path, 'notes') == (
        '{}: notes.txt is not an .npy member'.format(path))


def test_a_damaged_member_raises_zipfiles_error(tmp_path):
    path = write_npz(str(tmp_path / 'a.npz'), {'w': npy_bytes(
        numpy.arange(1 << 16, dtype=numpy.float32))})
    with open(path, 'r+b') as f:
        f.seek(1 << 17)
        f.write(b'\xff')
    with npz_members.NpzFile(path) as archive:
        with pytest.raises(zipfile.BadZipFile, match='CRC'):
            archive.verify()
        with pytest.raises(zipfile.BadZipFile, match='CRC'):
            archive['w']


def peak_megabytes(code):
    """The growth of the peak resident memory of a Python process while it
    runs ``code`` (after the project's imports), in MiB, and its output."""
    script = (
        'import resource, sys\n'
        'import models, image_data\n'
        'from imagenet_job import resume\n'
        'before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n'
        'try:\n'
        '    ' + code + '\n'
        'except Exception as e:\n'
        '    print(type(e).__name__, e)\n'
        'after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n'
        'print((after - before) // 1024)\n')
    proc = subprocess.run([sys.executable, '-c', script], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    return int(lines[-1]), lines[0]


def model_with(tmp_path, extra):
    """A small model.npz, as the trainer writes it, with ``extra``
    members: name -> the bytes of its .npy."""
    import chainer
    import models
    path = str(tmp_path / 'model.npz')
    chainer.serializers.save_npz(path, models.saved_model.ModelFile(
        models.ResNet50(3, width=0.125), dict(
            arch='resnet50', width=0.125, n_class=3, crop_size=32,
            resize=36)))
    with zipfile.ZipFile(path) as archive:
        members = {info.filename[:-4]: archive.read(info)
                   for info in archive.infolist()}
    members.update(extra)
    return write_npz(path, members, zipfile.ZIP_DEFLATED)


def test_a_bomb_in_a_model_takes_no_memory(tmp_path):
    """256 MiB of metadata compressed 300 to one (under the ratio bound):
    refused from its header, without a byte of it in memory."""
    path = model_with(tmp_path, {})
    with zipfile.ZipFile(path) as archive:
        members = {info.filename[:-4]: archive.read(info)
                   for info in archive.infolist()}
    bomb = write_bomb(str(tmp_path / 'bomb.npz'), 'metadata/notes', 256,
                      noise=3000, extra=members)
    assert os.path.getsize(bomb) < 3 << 20
    growth, line = peak_megabytes(
        'models.saved_model.load({!r})'.format(bomb))
    assert line == ('InputError {}: metadata/notes holds 268435456 bytes, '
                    "above the 67108864 of a model's metadata".format(bomb))
    assert growth < 32


def test_a_bomb_in_a_snapshot_takes_no_memory(tmp_path):
    bomb = write_bomb(str(tmp_path / 'snapshot_iter_1'), 'updater/iteration',
                      256)
    assert os.path.getsize(bomb) < 2 << 20
    growth, line = peak_megabytes(
        'resume.Snapshot.read({!r})'.format(bomb))
    assert line.startswith('InputError {}: updater/iteration is compressed '
                           .format(bomb))
    assert growth < 32


def test_a_snapshot_value_is_checked_from_its_header(tmp_path):
    """A member of another shape than the trainer's is refused before its
    payload is read: 64 MiB under the ratio bound stay out of memory."""
    bomb = write_bomb(str(tmp_path / 'snapshot_iter_1'), 'W', 64, noise=3000)
    growth, line = peak_megabytes(
        'import chainer, numpy\n'
        '    link = chainer.Link()\n'
        '    with link.init_scope():\n'
        '        link.W = chainer.Parameter(numpy.zeros(3, numpy.float32))\n'
        '    resume.Snapshot.read({!r}).load_into(link)'.format(bomb))
    assert line == ('InputError {}: W has shape (16777216,), the trainer '
                    'holds (3,); the snapshot is not one this trainer '
                    'wrote'.format(bomb))
    assert growth < 32


@pytest.mark.parametrize('shape', [(3, 1 << 20, 1 << 20), (1 << 40,)])
def test_a_mean_of_a_huge_shape_is_refused_naming_it(tmp_path, shape):
    import image_data
    path = str(tmp_path / 'mean.npy')
    with open(path, 'wb') as f:
        f.write(header_bytes(shape) + b'\0' * 12)
    with pytest.raises(InputError) as e:
        image_data.load_mean(path, 36)
    assert str(e.value) == (
        '{} declares shape {} of float32 ({} bytes), the file holds 12 '
        'bytes after its header'.format(path, shape, 4 * numpy.prod(
            shape, dtype=object)))


def test_a_mean_holding_objects_is_refused(tmp_path):
    import image_data
    path = str(tmp_path / 'mean.npy')
    numpy.save(path, numpy.array([1, 'a', None], dtype=object))
    with pytest.raises(InputError) as e:
        image_data.load_mean(path, 36)
    assert str(e.value) == (
        '{} holds Python objects, which are never loaded'.format(path))


def test_a_model_with_non_finite_weights_is_refused(tmp_path):
    import models
    with zipfile.ZipFile(model_with(tmp_path, {})) as archive:
        weights = numpy.lib.format.read_array(
            archive.open('res3/0/conv2/W.npy'))
    weights.flat[5] = numpy.nan
    path = model_with(tmp_path, {'res3/0/conv2/W': npy_bytes(weights)})
    with pytest.raises(InputError) as e:
        models.saved_model.load(path)
    assert str(e.value) == (
        '{}: its res3/0/conv2/W holds values that are not finite (NaN or '
        'inf); the model diverged or is damaged'.format(path))


def test_a_model_weight_of_another_shape_is_refused_from_its_header(
        tmp_path):
    import models
    path = model_with(tmp_path, {'fc/W': header_bytes((3, 1 << 40)) +
                                 b'\0' * 16})
    with pytest.raises(InputError) as e:
        models.saved_model.load(path)
    assert str(e.value).startswith(
        '{}: fc/W declares shape (3, 1099511627776) of float32'.format(path))
    path = model_with(tmp_path, {'fc/b': npy_bytes(numpy.zeros(
        4, numpy.float32))})
    with pytest.raises(InputError) as e:
        models.saved_model.load(path)
    assert str(e.value) == (
        '{}: fc/b has shape (4,), the ResNet50 holds (3,)'.format(path))


def test_initmodel_with_non_finite_weights_is_refused(tmp_path):
    """--initmodel's reader: a diverged model is named at the start, not as
    a diverged gradient later."""
    import models
    with zipfile.ZipFile(model_with(tmp_path, {})) as archive:
        bias = numpy.lib.format.read_array(archive.open('fc/b.npy'))
    bias[1] = numpy.inf
    path = model_with(tmp_path, {'fc/b': npy_bytes(bias)})
    with pytest.raises(InputError) as e:
        models.saved_model.initialize(models.ResNet50(3, width=0.125), path)
    assert str(e.value) == (
        '{}: its fc/b holds values that are not finite (NaN or inf); the '
        'model diverged or is damaged'.format(path))


def test_a_model_whose_metadata_asks_for_a_huge_network_is_refused(
        tmp_path):
    """The network is built from the metadata's counts: they must be those
    of its arrays, so that a 3-class file cannot ask for 10**9 classes."""
    import models
    path = model_with(tmp_path, {'metadata/n_class': npy_bytes(
        numpy.array(10 ** 9))})
    growth, line = peak_megabytes(
        'models.saved_model.load({!r})'.format(path))
    assert line == ('InputError {}: its fc/W has shape (3, 256), its width '
                    '0.125 and 1000000000 classes need 1000000000 rows'
                    .format(path))
    assert growth < 32
    path = model_with(tmp_path, {'metadata/width': npy_bytes(
        numpy.array(1000.))})
    with pytest.raises(InputError) as e:
        models.saved_model.load(path)
    assert str(e.value) == (
        '{}: its conv1/W has shape (8, 3, 7, 7), its width 1000 and 3 '
        'classes need 64000 rows'.format(path))

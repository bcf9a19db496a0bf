"""The trained model leaves the trainer: model.npz describes itself, and
eval_imagenet.py scores it (or a snapshot) as the trainer's closing line
did, or names the top-5 classes of images."""
import os
import re
import subprocess
import sys

import chainer
import numpy
import pytest

from conftest import REPO, run_mpi
import models

VAL = os.path.join(REPO, 'image_data', 'demo', 'val')
TINY = ['train_imagenet.py', '--demo', '--batchsize', '4', '--loaderjob',
        '0', '--val_batchsize', '100', '--width', '0.125', '--iterations',
        '6']


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('trained'))
    proc = run_mpi(2, TINY + ['--out', out])
    return out, proc.stdout.strip().splitlines()[-1]


def evaluate(*args):
    return subprocess.run([sys.executable, 'eval_imagenet.py'] + list(args),
                          cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def figures(line):
    return re.search(r'validation top-1 [0-9.]+%, top-5 [0-9.]+%, loss '
                     r'[0-9.e+-]+', line).group(0)


def test_model_npz_describes_itself(trained):
    out, _ = trained
    network, metadata = models.saved_model.load(
        os.path.join(out, 'model.npz'))
    assert metadata['arch'] == 'resnet50' and metadata['n_class'] == 10
    assert metadata['width'] == 0.125 and metadata['crop_size'] == 32
    assert metadata['class_names'][:2] == ['0_tshirt_top', '1_trouser']
    assert metadata['mean'].shape == (3,)
    assert metadata['recipe']['name'] == 'akiba2017'
    assert metadata['validation']['iteration'] == 6
    with numpy.load(os.path.join(out, 'model.npz')) as archive:
        assert all(archive[k].dtype != object for k in archive.files)
    # Chainer's own loader reads the network's arrays as before
    net = models.ResNet50(10, width=0.125)
    chainer.serializers.load_npz(os.path.join(out, 'model.npz'), net)
    numpy.testing.assert_array_equal(net.fc.W.array, network.fc.W.array)


@pytest.mark.parametrize('name, loaders', [
    ('model.npz', '0'), ('snapshot_iter_6', '0'), ('model.npz', '2')])
def test_eval_prints_the_closing_lines_figures(trained, name, loaders):
    out, closing = trained
    args = [os.path.join(out, name), VAL, '--loaderjob', loaders] + (
        ['--crop-size', '32'] if name.startswith('snapshot') else [])
    proc = evaluate(*args)
    assert proc.returncode == 0, proc.stderr
    assert figures(proc.stdout) == figures(closing)
    assert 'on 1000 images' in proc.stdout


def test_predict_names_the_top_5_classes(trained):
    out, _ = trained
    image = os.path.join(VAL, '1_trouser', sorted(os.listdir(
        os.path.join(VAL, '1_trouser')))[0])
    proc = evaluate(os.path.join(out, 'model.npz'), '--predict', image)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith(image + ': ')
    assert len(re.findall(r'\d_[a-z_]+ [0-9.]+%', line)) == 5


def test_predict_on_a_fifo_or_a_device_ends_in_one_line(trained, tmp_path):
    """A FIFO that no process writes (or /dev/zero) among --predict's images
    is never opened for a blocking read: one line naming it, exit 2."""
    out, _ = trained
    fifo = str(tmp_path / 'image.JPEG')
    os.mkfifo(fifo)
    for path in (fifo, '/dev/zero'):
        proc = evaluate(os.path.join(out, 'model.npz'), '--predict', path)
        assert proc.returncode == 2, proc.stderr
        assert re.fullmatch(r'eval_imagenet.py: error: .*{}: not a regular '
                            r'file.*\n'.format(re.escape(path)), proc.stderr)


@pytest.mark.parametrize('content, message', [
    (b'{"not": "a model"}', 'not a model.npz or snapshot (not an .npz'),
])
def test_a_file_this_code_did_not_write_is_one_line(tmp_path, content,
                                                    message):
    path = tmp_path / 'model.npz'
    path.write_bytes(content)
    proc = evaluate(str(path), VAL)
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'eval_imagenet.py: error: {}: {}'.format(
        path, message) + ' archive)'
    numpy.savez(str(path), x=numpy.zeros(3))
    proc = evaluate(str(path), VAL)
    assert proc.returncode == 2 and 'not a model.npz or snapshot this ' \
        'trainer wrote' in proc.stderr and 'Traceback' not in proc.stderr


def flipped_byte(path):
    """``path`` with one byte of its first compressed member changed."""
    with open(path, 'rb') as f:
        data = bytearray(f.read())
    data[200] ^= 0xff
    return bytes(data)


@pytest.mark.parametrize('changes, message', [
    ({'conv1/W': numpy.float32(1)},
     r'its conv1/W has shape \(\), its width 0.125 and 10 classes need 8 '
     r'rows$'),
    ({'metadata/arch': numpy.array(['resnet50'])},
     r"a damaged model or one this code did not write \(TypeError: "
     r"unhashable type: 'list'\)$"),
    ({'metadata/recipe': numpy.array('not json')},
     r'a damaged model or one this code did not write \(JSONDecodeError: '),
    ({'metadata/mean': numpy.array([numpy.nan, 1, 2], numpy.float32)},
     r'its mean \(shape \(3,\)\) is not a \(3,\) or \(3, 37, 37\) '
     r'mean of 8-bit pixels$'),
    ({'metadata/crop_size': numpy.array(64)},
     r'crop size 64 does not fit its resized side 37$'),
    ('flipped byte', r'a damaged model or one this code did not write '
     r'\((BadZipFile|error): '),
])
def test_a_damaged_or_foreign_model_is_one_line(trained, tmp_path,
                                                changes, message):
    """What Chainer's loader would broadcast, or fail on with a traceback,
    through eval_imagenet.py, and the model is left as it was."""
    out, _ = trained
    path = tmp_path / 'model.npz'
    if changes == 'flipped byte':
        path.write_bytes(flipped_byte(os.path.join(out, 'model.npz')))
    else:
        with numpy.load(os.path.join(out, 'model.npz')) as archive:
            values = dict({k: archive[k] for k in archive.files}, **changes)
        numpy.savez(str(path), **values)
    before = path.read_bytes()
    proc = evaluate(str(path), VAL)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and re.match(
        r'eval_imagenet\.py: error: {}: {}'.format(re.escape(str(path)),
                                                   message), lines[0]), lines
    assert path.read_bytes() == before


def test_eval_names_a_bad_flag_in_one_line(trained, tmp_path):
    out, _ = trained
    model = os.path.join(out, 'model.npz')
    proc = evaluate(model, VAL, '--crop-size', '8')
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        'eval_imagenet.py: error: --crop-size must be at least 32, got 8')
    mean = tmp_path / 'mean.npy'
    mean.write_text('127 127 127')
    proc = evaluate(model, VAL, '--mean', str(mean))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ('eval_imagenet.py: error: --mean {}: not '
                                   'a .npy array (no .npy header)'.format(
                                       mean))


#: eval_imagenet.main with 1 GiB of address space beyond what its imports
#: took: the (250, 3, 7, 7, 112, 112) float32 columns of the first
#: convolution at 224 px (1.72 GiB) cannot be allocated.
CAPPED_EVAL = '''
import sys
sys.path.insert(0, 'tests/mpi_scripts')
import address_space
import eval_imagenet
address_space.cap(2 ** 30)
eval_imagenet.main(sys.argv[1:])
'''


def test_eval_out_of_memory_is_one_line(trained):
    out, _ = trained
    proc = subprocess.run(
        [sys.executable, '-c', CAPPED_EVAL, os.path.join(out, 'model.npz'),
         VAL, '--crop-size', '224'], cwd=REPO, capture_output=True,
        text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert re.fullmatch(r'eval_imagenet\.py: error: Unable to allocate '
                        r'1\.72 GiB for an array with shape \(250, .+\) '
                        r'and data type float32; a smaller --batchsize needs '
                        r'less', proc.stderr.strip()), proc.stderr[-2000:]


def test_the_onnx_graph_gives_the_same_classes_and_logits(trained,
                                                          tmp_path):
    onnxruntime = pytest.importorskip('onnxruntime')
    out, _ = trained
    onnx_path = str(tmp_path / 'model.onnx')
    proc = subprocess.run([sys.executable, 'export_onnx.py',
                           os.path.join(out, 'model.npz'), onnx_path],
                          cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    network, metadata = models.saved_model.load(
        os.path.join(out, 'model.npz'))
    import image_data
    from image_data.image_list import read_dataset
    transform = image_data.ValTransform(metadata['crop_size'],
                                        metadata['mean'], metadata['resize'])
    index, _ = read_dataset(VAL, '.', metadata['class_names'])
    x = numpy.stack([transform(index[i])[0] for i in range(0, 1000, 10)])
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        expected = network(x).array
    session = onnxruntime.InferenceSession(onnx_path)
    logits, = session.run(['logits'], {'images': x})
    assert (logits.argmax(axis=1) == expected.argmax(axis=1)).all()
    # float32 sums in another order: within 1e-3 plus 1e-5 of the largest
    # logit (a few hundred after six updates of final-batch BN on 4 images)
    assert numpy.abs(logits - expected).max() <= 1e-3 + 1e-5 * numpy.abs(
        expected).max()
    props = set(session.get_modelmeta().custom_metadata_map)
    assert {'crop_size', 'mean', 'class_names'} <= props


def export(*args):
    return subprocess.run([sys.executable, 'export_onnx.py'] + list(args),
                          cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize('make, force, message', [
    (lambda model, out: out.write_bytes(b'mine'), False,
     '{out} exists already; --force replaces it'),
    (lambda model, out: os.symlink('elsewhere', str(out)), False,
     '{out} exists already; --force replaces it'),
    (lambda model, out: os.link(str(model), str(out)), True,
     '{out} is the input {model}; write the output elsewhere'),
    (lambda model, out: os.mkfifo(str(out)), True,
     '{out} is a FIFO; it is never replaced'),
    (lambda model, out: out.mkdir(), True,
     '{out} is a folder; it is never replaced'),
    (None, True, '{out}: its folder {out.parent} does not exist'),
])
def test_export_refuses_what_lies_at_out_in_one_line(tmp_path, make, force,
                                                     message):
    model = tmp_path / 'model.npz'
    model.write_bytes(b'the trained model')
    out = tmp_path / 'out.onnx'
    if make is None:
        out = tmp_path / 'missing' / 'out.onnx'
    else:
        make(model, out)
    before = sorted(os.listdir(str(tmp_path)))
    proc = export(str(model), str(out), *(['--force'] if force else []))
    assert proc.returncode == 2
    assert proc.stderr == 'export_onnx.py: error: {}\n'.format(
        message.format(out=out, model=model))
    assert model.read_bytes() == b'the trained model'
    assert sorted(os.listdir(str(tmp_path))) == before


def test_export_over_its_own_input_is_refused_even_with_force(trained):
    out, _ = trained
    model = os.path.join(out, 'model.npz')
    with open(model, 'rb') as f:
        content = f.read()
    for path in (model, os.path.join(out, '.', 'model.npz')):
        proc = export(model, path, '--force')
        assert proc.returncode == 2
        assert proc.stderr == ('export_onnx.py: error: {} is the input {}; '
                               'write the output elsewhere\n'.format(
                                   path, model))
    with open(model, 'rb') as f:
        assert f.read() == content


def test_export_with_force_replaces_a_link_not_its_target(trained,
                                                          tmp_path):
    pytest.importorskip('onnx')
    out, _ = trained
    target = tmp_path / 'precious'
    target.write_text('keep me')
    onnx_path = tmp_path / 'model.onnx'
    os.symlink(str(target), str(onnx_path))
    proc = export(os.path.join(out, 'model.npz'), str(onnx_path), '--force')
    assert proc.returncode == 0, proc.stderr
    assert not onnx_path.is_symlink()
    assert onnx_path.read_bytes()[:2] != b'ke' and onnx_path.stat().st_size
    assert target.read_text() == 'keep me'
    assert sorted(os.listdir(str(tmp_path))) == ['model.onnx', 'precious']


def test_initmodel_starts_a_run_from_a_model_with_a_new_head(
        trained, tmp_path):
    out, _ = trained
    train = os.path.join(REPO, 'image_data', 'demo', 'train')
    listing = tmp_path / 'train.txt'
    with open(listing, 'w') as f:
        for label, folder in enumerate(['0_tshirt_top', '1_trouser']):
            for name in sorted(os.listdir(os.path.join(train, folder)))[:20]:
                f.write('{} {}\n'.format(os.path.join(train, folder, name),
                                         label))
    model = os.path.join(out, 'model.npz')
    args = [a for a in TINY if a != '--demo'] + [
        str(listing), str(listing), '--crop-size', '32', '--iterations',
        '1', '--initmodel', model, '--out', str(tmp_path / 'fine')]
    proc = run_mpi(1, args)
    assert ('--initmodel {}: a 10-class model; this run has 2 classes, so '
            'its head (fc) starts anew'.format(model)) in proc.stdout
    proc = run_mpi(1, args[:-1] + [str(tmp_path / 'wide'), '--width',
                                   '0.25'], check=False)
    assert proc.returncode == 2
    assert 'error: --initmodel {}: a resnet50 of width 0.125, not the ' \
        'network of this run: its /bn1/beta is (8,), this run\'s (16,)' \
        .format(model) in proc.stderr

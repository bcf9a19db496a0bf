"""largebatch.outputs: a file is written whole by a rename, never through a
link, never over what the caller may not replace."""
import os

import pytest

from largebatch import outputs


def write(text):
    return lambda f: f.write(text)


def test_a_new_file_is_written_and_nothing_else_is_left(tmp_path):
    path = tmp_path / 'out.json'
    outputs.write_replacing(str(path), write('new'), text=True)
    assert path.read_text() == 'new'
    assert os.listdir(str(tmp_path)) == ['out.json']


def test_an_existing_file_is_replaced_only_when_forced(tmp_path):
    path = tmp_path / 'out'
    path.write_bytes(b'mine')
    with pytest.raises(outputs.OutputError) as info:
        outputs.write_replacing(str(path), write(b'new'))
    assert str(info.value) == '{} exists already'.format(path)
    assert info.value.replaceable
    assert path.read_bytes() == b'mine'
    outputs.write_replacing(str(path), write(b'new'), force=True)
    assert path.read_bytes() == b'new'


def test_a_link_is_replaced_and_its_target_kept(tmp_path):
    target = tmp_path / 'precious'
    target.write_bytes(b'keep me')
    path = tmp_path / 'out'
    os.symlink(str(target), str(path))
    outputs.write_replacing(str(path), write(b'new'), force=True)
    assert not path.is_symlink() and path.read_bytes() == b'new'
    assert target.read_bytes() == b'keep me'


@pytest.mark.parametrize('make, kind', [
    (os.mkfifo, 'a FIFO'), (os.mkdir, 'a folder')])
def test_what_is_no_regular_file_is_never_replaced(tmp_path, make, kind):
    path = tmp_path / 'out'
    make(str(path))
    with pytest.raises(outputs.OutputError) as info:
        outputs.write_replacing(str(path), write(b'new'), force=True)
    assert str(info.value) == '{} is {}; it is never replaced'.format(
        path, kind)
    assert not info.value.replaceable
    assert os.listdir(str(tmp_path)) == ['out']


@pytest.mark.parametrize('alias', [
    lambda model, out: os.link(model, out),
    lambda model, out: os.symlink(model, out),
    None])
def test_an_input_is_never_replaced(tmp_path, alias):
    model = str(tmp_path / 'model.npz')
    with open(model, 'wb') as f:
        f.write(b'trained')
    out = os.path.join(str(tmp_path), '.', 'model.npz')
    if alias:
        out = str(tmp_path / 'alias')
        alias(model, out)
    with pytest.raises(outputs.OutputError,
                       match='is the input .*model.npz; write the output '
                       'elsewhere'):
        outputs.write_replacing(out, write(b'new'), force=True,
                                inputs=[model])
    with open(model, 'rb') as f:
        assert f.read() == b'trained'


def test_a_missing_folder_is_one_line(tmp_path):
    path = tmp_path / 'missing' / 'out.png'
    with pytest.raises(outputs.OutputError) as info:
        outputs.write_replacing(str(path), write(b'new'))
    assert str(info.value) == '{}: its folder {} does not exist'.format(
        path, path.parent)


def test_a_failed_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / 'out'
    path.write_bytes(b'old')

    def fail(f):
        f.write(b'half')
        raise OSError(28, 'No space left on device')
    with pytest.raises(OSError):
        outputs.write_replacing(str(path), fail, force=True)
    assert path.read_bytes() == b'old'
    assert os.listdir(str(tmp_path)) == ['out']


def test_a_writer_that_writes_nothing_leaves_the_file(tmp_path):
    path = tmp_path / 'out.png'
    path.write_bytes(b'old')
    with outputs.replacing(str(path), force=True, suffix='.png') as tmp:
        assert os.path.basename(tmp) == '.out.png.tmp{}.png'.format(
            os.getpid())
        assert outputs.TEMPORARY.match(os.path.basename(tmp))
    assert path.read_bytes() == b'old'
    assert os.listdir(str(tmp_path)) == ['out.png']


def test_a_temporary_name_in_the_way_is_not_written_through(tmp_path):
    """A killed writer of the same PID (containers reuse them) left its
    temporary, or a link lies there: another name is taken."""
    target = tmp_path / 'precious'
    target.write_bytes(b'keep me')
    left = tmp_path / '.out.tmp{}'.format(os.getpid())
    os.symlink(str(target), str(left))
    outputs.write_replacing(str(tmp_path / 'out'), write(b'new'))
    assert (tmp_path / 'out').read_bytes() == b'new'
    assert target.read_bytes() == b'keep me'
    assert sorted(os.listdir(str(tmp_path))) == sorted(
        ['out', 'precious', left.name])


def test_create_exclusive_never_opens_what_exists(tmp_path):
    path = tmp_path / 'probe'
    os.close(outputs.create_exclusive(str(path)))
    with pytest.raises(FileExistsError):
        outputs.create_exclusive(str(path))

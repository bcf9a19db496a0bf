"""image_data.make_demo: the folders it replaces are refused in one line
unless --force, and a link never, before anything is removed."""
import os

import pytest

from image_data import make_demo


@pytest.mark.parametrize('make, force, problem', [
    (lambda path: os.mkdir(path), False,
     'exists already; --force replaces it'),
    (lambda path: os.symlink('elsewhere', path), True,
     'is a link or no folder; it is never replaced'),
])
def test_an_existing_split_is_refused_before_anything_is_removed(
        tmp_path, capsys, make, force, problem):
    (tmp_path / 'train').mkdir()
    (tmp_path / 'train' / 'mine.jpg').write_bytes(b'mine')
    make(str(tmp_path / 'val'))
    with pytest.raises(SystemExit) as info:
        make_demo.main(['--out', str(tmp_path), '--idx-dir',
                        str(tmp_path / 'none')] + (['--force'] * force))
    assert info.value.code == 2
    named = tmp_path / ('val' if force else 'train')  # the first refused
    assert capsys.readouterr().err == (
        'make_demo: error: --out: {} {}\n'.format(named, problem))
    assert (tmp_path / 'train' / 'mine.jpg').read_bytes() == b'mine'

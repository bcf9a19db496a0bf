"""largebatch.chainer_hook: in the venv a plain ``import chainer`` loads
chainer_compat first, and an interpreter that never imports Chainer loads
neither."""
import os
import subprocess
import sys

from largebatch import chainer_hook


def fresh(code, tmp_path):
    """What a fresh interpreter of the venv prints, run outside the
    repository (no chainer_compat on its path but the installed one)."""
    out = subprocess.run([sys.executable, '-c', code], cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=''))
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_import_chainer_alone_loads_the_shim_first(tmp_path):
    assert fresh('import sys; import chainer; import chainer.functions; '
                 'print("largebatch.chainer_compat" in sys.modules)',
                 tmp_path) == ['True']


def test_the_hook_loads_nothing_until_chainer_is_imported(tmp_path):
    assert fresh('import sys; print(sorted(m for m in sys.modules if m in '
                 '("numpy", "chainer", "largebatch.chainer_compat")))',
                 tmp_path) == ['[]']


def test_the_pth_file_installs_the_hook(tmp_path):
    path = chainer_hook.write_pth(str(tmp_path))
    with open(path) as f:
        line = f.read()
    assert line.startswith('import ') and 'chainer_hook.install()' in line
    assert os.path.basename(path) > '__editable__'

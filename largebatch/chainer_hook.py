"""``import chainer`` works on NumPy 2 wherever it comes first: an import
hook loads :mod:`chainer_compat` just before Chainer.

A ``.pth`` file in site-packages installs the hook as the interpreter
starts (``python -m largebatch.chainer_hook`` writes it for that
interpreter; ``make setup`` does so for the venv). Until Chainer is
imported the hook loads nothing, so an interpreter that never imports
Chainer pays for one small module.
"""
import os
import sys

#: The file's name sorts after pip's ``__editable__`` files, which make this
#: project importable in an editable install.
PTH_NAME = 'chainer_largebatch_resnet50.pth'
PTH_LINE = ('import largebatch.chainer_hook; '
            'largebatch.chainer_hook.install()\n')


class _BeforeChainer(object):
    """A finder of ``sys.meta_path`` that imports :mod:`chainer_compat` when
    ``chainer`` is first looked for, then leaves the search to the other
    finders and steps aside."""

    def find_spec(self, name, path=None, target=None):
        if name == 'chainer':
            sys.meta_path.remove(self)
            from largebatch import chainer_compat  # NOQA: F401
        return None


def install():
    """Put the hook first on ``sys.meta_path``, once."""
    if 'chainer' not in sys.modules and not any(
            isinstance(finder, _BeforeChainer) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BeforeChainer())


def write_pth(site_packages):
    """Write the ``.pth`` file that installs the hook into folder
    ``site_packages``; its path."""
    path = os.path.join(site_packages, PTH_NAME)
    with open(path, 'w') as f:
        f.write(PTH_LINE)
    return path


if __name__ == '__main__':
    import sysconfig
    print(write_pth(sysconfig.get_paths()['purelib']))

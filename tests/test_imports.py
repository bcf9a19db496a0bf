"""A package loads only what its device uses: the CPU engine and oneDNN are
for CPU runs, loaded by the training script when it trains on NumPy."""
import subprocess
import sys

from conftest import REPO

PACKAGES = ('models', 'optimizers', 'extensions', 'communicators',
            'datasets', 'updaters', 'train_imagenet')

LOADED = '''
import sys
import chainer_compat  # before chainer, as every entry point
import {modules}
engine = sorted(m for m in sys.modules
                if m == 'cpu_engine' or m.startswith('cpu_engine.'))
with open('/proc/self/maps') as maps:
    dnnl = sorted({{line.split()[-1] for line in maps if 'libdnnl' in line}})
print(engine, dnnl)
'''


def loaded(modules):
    """(cpu_engine modules, libdnnl files mapped) after importing them."""
    out = subprocess.run(
        [sys.executable, '-c', LOADED.format(modules=', '.join(modules))],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_library_packages_load_no_cpu_engine_and_no_onednn():
    assert loaded(PACKAGES) == '[] []'


def test_the_cpu_engine_loads_onednn():
    """The check above can see oneDNN: importing the engine maps it (where
    the onednn-cpu-gomp wheel is installed)."""
    engine = loaded(['cpu_engine', 'cpu_engine.onednn'])
    import cpu_engine.onednn
    assert engine.startswith("['cpu_engine', ")
    assert ('libdnnl' in engine) == cpu_engine.onednn.available()

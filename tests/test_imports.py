"""A package loads only what its device uses: the CPU engine and oneDNN are
for CPU runs, loaded by the training script when it trains on NumPy, and the
CPU's float16 conversions and ring for mpi_fp16; each package imports alone,
on NumPy 2 too, in a fresh interpreter."""
import subprocess
import sys

import pytest

from conftest import REPO

PACKAGES = ('models', 'optimizers', 'extensions', 'communicators',
            'half_precision', 'image_data', 'updaters', 'imagenet_job',
            'largebatch', 'train_imagenet')

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


@pytest.mark.parametrize('package', PACKAGES)
def test_each_package_imports_alone(package):
    out = subprocess.run([sys.executable, '-c', 'import ' + package],
                         cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def modules_after(imports, wanted):
    """The names of ``sys.modules`` that ``wanted`` (a Python expression of
    ``m``) keeps after a fresh interpreter runs ``import IMPORTS``."""
    code = ('import sys\nimport {}\nprint(sorted(m for m in sys.modules '
            'if {}))\n'.format(imports, wanted))
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


FLOAT16_CPU = ('m in ("half_precision._half", "half_precision.conversion", '
               '"communicators.ring_allreduce")')


def test_the_gpu_communicator_loads_no_cpu_float16_code():
    assert modules_after('communicators.pure_nccl_fp16_communicator, '
                         'updaters', FLOAT16_CPU) == '[]'
    # the check sees them where they are used
    cpu = modules_after('communicators.mpi_fp16_communicator, updaters',
                        FLOAT16_CPU)
    assert 'communicators.ring_allreduce' in cpu
    assert 'half_precision.conversion' in cpu


def test_the_half_precision_package_loads_none_of_its_modules():
    """Its modules are imported by name: the package itself loads neither
    the F16C extension nor the CUDA kernels' module, nor CuPy."""
    assert modules_after('half_precision', 'm == "cupy" or m.startswith(('
                         '"half_precision.", "cupy."))') == '[]'

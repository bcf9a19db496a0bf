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
import largebatch.chainer_compat  # before chainer, as every entry point
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


#: The project's packages and top-level modules, each layer above those it
#: may import (docs/layout.md): the script, the job, the library packages,
#: then what they all share.
LAYERS = [('train_imagenet',), ('imagenet_job',),
          ('extensions', 'updaters', 'communicators', 'optimizers', 'models',
           'image_data', 'cpu_engine', 'half_precision'),
          ('largebatch',)]


def project_imports(name):
    """The project's packages and modules that package or module ``name``
    imports (at any depth of its code, lazily or not), itself aside."""
    import ast
    import os
    known = {top for layer in LAYERS for top in layer}
    root = os.path.join(REPO, name)
    paths = [root + '.py'] if os.path.exists(root + '.py') else [
        os.path.join(folder, f) for folder, _, files in os.walk(root)
        for f in files if f.endswith('.py')]
    found = set()
    for path in paths:
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split('.')[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                found.add(node.module.split('.')[0])
    return (found & known) - {name}


@pytest.mark.parametrize('depth', range(len(LAYERS)))
def test_no_layer_imports_one_above_it_or_beside_it_in_a_cycle(depth):
    above = {top for layer in LAYERS[:depth] for top in layer}
    for name in LAYERS[depth]:
        assert not project_imports(name) & above, name
    graph = {name: project_imports(name) for name in LAYERS[depth]}
    for name in graph:  # within a layer, the imports form no cycle
        seen, todo = set(), list(graph[name])
        while todo:
            other = todo.pop()
            if other in graph and other not in seen:
                seen.add(other)
                todo.extend(graph[other])
        assert name not in seen, name

# One-command entry points: `make demo` trains on the embedded dataset,
# `make test` checks the style (.flake8) and runs the test suite. Both create
# (or reuse) the venv first.
PYTHON ?= python3
VENV ?= .venv
NP ?= 2
PY := $(VENV)/bin/python
MPIEXEC := jobs/mpi_quiet.sh $(VENV)/bin/mpiexec --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root) \
	-x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1
DEMO_OUT ?= result/demo
# The NumPy line of the venv (README.md, "Which NumPy"): NUMPY='numpy<2'
# for the 1.x line.
NUMPY ?= numpy>=2
# The extras of the venv; the NumPy 1.x venv goes without onnx (its test
# skips): onnx's ml_dtypes wants NumPy 2 in its current releases.
EXTRAS ?= fast-decode,mpi,onnx,tensorboard,test

.PHONY: setup demo test test-fast test-numpy1 test-chainer-functions clean

setup: $(VENV)/.installed

# chainer 7.8.1 builds from its sdist, whose setup.py needs setuptools<70:
# older pips read PIP_CONSTRAINT in the build environment, newer ones
# PIP_BUILD_CONSTRAINT. The C extensions are built at install: a changed
# source reinstalls. A .pth file then loads largebatch.chainer_compat
# before any `import chainer` of the venv (largebatch/chainer_hook.py).
$(VENV)/.installed: setup.py constraints.txt half_precision/_half.c \
		cpu_engine/_kernels.c image_data/_resample.c largebatch/chainer_hook.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt PIP_BUILD_CONSTRAINT=$(CURDIR)/constraints.txt \
		$(PY) -m pip install -q -e '.[$(EXTRAS)]' '$(NUMPY)'
	$(PY) -m largebatch.chainer_hook
	touch $@

# The demo continues the run in DEMO_OUT (or reports it, when finished), so
# running it again loses nothing; DEMO_OUT=result/demo2 starts another. It
# keeps its newest snapshot only (about 280 MB).
demo: setup
	$(MPIEXEC) -n $(NP) $(PY) train_imagenet.py --demo --out $(DEMO_OUT) \
		--resume auto --keep-snapshots 1

test: setup
	$(PY) -m flake8
	$(PY) -m pytest -q tests $(PYTEST_ARGS)

# The tests that start no process (no mpiexec, no trainer run, no GPU): a
# few minutes; `make test` runs them all.
test-fast: setup
	$(PY) -m flake8
	FAST_TIER=1 $(PY) -m pytest -q -m 'not integration and not gpu' tests

# The suite on the NumPy 1.x line, in its own venv (.ci/run runs both),
# without the tests of the launchers (a real Slurm, emulated nodes) and of
# the study driver: they run the trainer, already tested on both lines, many
# times over, and take about half of the suite's time.
DRIVER_TESTS := tests/integration/test_slurm.py \
	tests/integration/test_local_cluster.py \
	tests/integration/test_paper_regime_quick_study.py
# Nor the stopped and blocked worker tests: timers and signals, the same on
# both lines, that spend most of their time waiting for the stall timeout.
STOPPED_WORKER_TESTS := \
	tests/integration/test_reliability.py::test_a_stopped_rank \
	tests/integration/test_reliability.py::test_a_rank_stopped \
	tests/integration/test_reliability.py::test_a_rank_blocked \
	tests/integration/test_reliability.py::test_one_stop_signal
NUMPY1 := VENV=.venv-numpy1 NUMPY='numpy<2' EXTRAS=fast-decode,mpi,tensorboard,test
NUMPY1_SKIP := $(addprefix --ignore=,$(DRIVER_TESTS)) \
	$(addprefix --deselect=,$(STOPPED_WORKER_TESTS))
test-numpy1:
	$(MAKE) test $(NUMPY1) PYTEST_ARGS='$(NUMPY1_SKIP)'

# Chainer 7.8.1's own tests of the functions the CPU engine replaces
# (convolution, batch normalization, ReLU, max pooling) and of its links
# (Convolution2D, BatchNormalization), run against the engine on both
# NumPy lines, along its default paths, with every float32
# convolution by oneDNN, and with channels-last inputs. The tests are
# fetched into result/ from CHAINER_SOURCE (a clone of chainer/chainer) or
# GitHub's tag archive (tests/chainer_functions/run.py).
ENGINE_PATHS := default onednn channels-last
test-chainer-functions: setup
	$(MAKE) setup $(NUMPY1)
	set -e; for py in $(PY) .venv-numpy1/bin/python; do \
	  for paths in $(ENGINE_PATHS); do \
	    $$py tests/chainer_functions/run.py --engine-paths $$paths; done; done

clean:
	rm -rf $(VENV) .venv-numpy1 .venv-gpu-offline .venv-gpu14-offline \
		.venv-gpu14-cuda12-offline result

# The CUDA 12 stack (docs/gpu.md) lives in its own venv, so that the CPU venv
# carries no GPU wheels. `make test-gpu-stack` needs no GPU: it checks that
# CuPy, cuDNN and NCCL load from the pip wheels. `make gpu-check` runs the
# whole GPU check (install, stack line, GPU tests, step timing) on a GPU
# machine and writes result/gpu_check.json.
VENV_GPU ?= .venv-gpu
PY_GPU := $(VENV_GPU)/bin/python

.PHONY: setup-gpu test-gpu-stack gpu-check test-gpu-offline

setup-gpu: $(VENV_GPU)/.installed

$(VENV_GPU)/.installed: setup.py constraints.txt
	test -x $(PY_GPU) || $(PYTHON) -m venv $(VENV_GPU)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt PIP_BUILD_CONSTRAINT=$(CURDIR)/constraints.txt \
		$(PY_GPU) -m pip install -q -e '.[gpu,mpi,test]' '$(NUMPY)'
	touch $@

test-gpu-stack: setup-gpu
	$(PY_GPU) -m pytest -q -rs tests/gpu/test_gpu_stack.py

# The GPU tier that needs no GPU (docs/gpu.md), on three stacks, each in its
# own venv: CuPy 13 with CUDA 12 (the gpu extra less cuDNN), CuPy 14 with
# the same CUDA 12 libraries (a GPU node's PyTorch brings them) and CuPy 14
# with CUDA 13. Every kernel is built by CuPy and compiled by NVRTC, and
# every name the GPU modules read is resolved; pip's cache keeps the wheels.
GPU_OFFLINE := .venv-gpu-offline:gpu-offline \
	.venv-gpu14-cuda12-offline:gpu-cupy14-cuda12 \
	.venv-gpu14-offline:gpu-cuda13
test-gpu-offline:
	set -e; for pair in $(GPU_OFFLINE); do venv=$${pair%%:*}; \
	  test -x $$venv/bin/python || $(PYTHON) -m venv $$venv; \
	  PIP_CONSTRAINT=$(CURDIR)/constraints.txt \
	  PIP_BUILD_CONSTRAINT=$(CURDIR)/constraints.txt \
	  $$venv/bin/python -m pip install -q -e ".[$${pair##*:},mpi,test]" \
	    'numpy>=2'; \
	  REQUIRE_CUPY=1 OMPI_MCA_btl=self $$venv/bin/python -m pytest -q -rs \
	    -p no:cacheprovider tests/gpu_offline; done

# TORCH=1 also installs PyTorch 2.3.1 (+1.4 GB) for the step's comparison.
# OFFLINE=1 installs nothing and checks $(PYTHON) as it is (docs/gpu.md).
GPU_CHECK_OUT ?= result/gpu_check.json
gpu-check:
	$(PYTHON) benchmarks/gpu_check.py --out $(GPU_CHECK_OUT) $(if $(filter 1,$(OFFLINE)),--python $(PYTHON),--venv $(VENV_GPU) $(if $(filter 1,$(TORCH)),--torch))

# What an offline GPU machine with Python, NumPy 2, CuPy, PyTorch and mpi4py
# lacks, as wheels in one folder (docs/gpu.md): Chainer 7.8.1 and this
# project built by $(PYTHON) (use the GPU machine's Python version), and
# the wheels of Chainer's, Pillow's, matplotlib's, pytest's and
# google-crc32c's requirements
# for that version, less NumPy and what PyTorch brings. Not oneDNN (39 MB):
# the project's wheel goes in with --no-deps, and GPUs do not use it.
WHEELHOUSE ?= wheelhouse
WHEELS_HAVE := numpy
.PHONY: wheels
wheels:
	rm -rf $(WHEELHOUSE) && mkdir -p $(WHEELHOUSE)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt PIP_BUILD_CONSTRAINT=$(CURDIR)/constraints.txt \
		$(PYTHON) -m pip wheel -q --no-deps -w $(WHEELHOUSE) chainer==7.8.1 .
	$(PYTHON) -m pip download -q --only-binary=:all: -d $(WHEELHOUSE) \
		protobuf six filelock typing_extensions setuptools pillow \
		'matplotlib>=3.5' pytest google-crc32c
	cd $(WHEELHOUSE) && for name in $(WHEELS_HAVE); do rm -f $$name-*.whl; done
	du -sh $(WHEELHOUSE)

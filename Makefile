# One-command entry points: `make demo` trains on the embedded dataset,
# `make test` runs the test suite. Both create (or reuse) the venv first.
PYTHON ?= python3
VENV ?= .venv
NP ?= 2
PY := $(VENV)/bin/python
MPIEXEC := $(VENV)/bin/mpiexec --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root) \
	-x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1
DEMO_OUT ?= result/demo

.PHONY: setup demo test clean

setup: $(VENV)/.installed

# chainer 7.8.1 builds from its sdist, whose setup.py needs setuptools<70:
# older pips read PIP_CONSTRAINT in the build environment, newer ones
# PIP_BUILD_CONSTRAINT.
$(VENV)/.installed: setup.py constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt PIP_BUILD_CONSTRAINT=$(CURDIR)/constraints.txt \
		$(PY) -m pip install -q -e '.[mpi,test]'
	touch $@

demo: setup
	$(MPIEXEC) -n $(NP) $(PY) train_imagenet.py --demo --out $(DEMO_OUT)

test: setup
	$(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) result

"""The paper's regime at small scale: a minibatch 128x the reference's.

Akiba et al. (2017) train ResNet-50 with a total minibatch of 32,768, 128x
He et al.'s 256 (so lr 12.8 against 0.1 under linear scaling), about 39
updates per epoch, 2.6% of the data per step. This driver asks the same of
the project's ``train_imagenet.py`` on the whole Fashion-MNIST training set
(60,000 images; the 10,000 test images are the validation set):

- a learning-rate sweep of the reference (total minibatch ``b_ref``, one BN
  batch, He et al.'s step decay) picks ``lr_ref``, the best final top-1;
- at ``k x b_ref`` images per step (``k`` = 128: 1,536 = 2.56% of the set,
  39 updates per epoch), virtual workers of ``bn_batch`` images
  (``--accumulate``), every recipe at ``k x lr_ref`` (linear scaling):
  ``sgd``, ``goyal2017``, ``akiba2017``, ``you2017``, ``akiba2017``
  without each of its techniques, one at a time, and ``akiba2017`` with
  ``goyal2017``'s zero-init (and the reference with it, at ``b_ref``);
- the four recipes at smaller ``k`` (Goyal et al.'s Figure 1);

every run for the same epochs, the schedules laid out on them
(``--scale-schedule``), several seeds. Each run has its own directory under
``--out``; an interrupted run resumes from its newest snapshot. A finished
run's result and log are copied to ``--results`` (``docs/large_batch_study``)
with one row per run in its ``results.json``; a run whose result is there is
skipped, so the study continues later or on another machine (each run
pins OpenBLAS's AVX2 kernels, whose rounding does not depend on the CPU, and
records its machine), and the page (``docs/large_batch_study.md``) is
regenerated from those files after every run.

    python -m studies.paper_regime_study [--jobs 2] [--quick]
    python -m studies.paper_regime_study --report-only

The package: ``regime`` (the plan, its configurations and runs), ``runner``
(training them), ``report`` and ``plots`` (``results.json`` and the page).

The images come from Debian's ``dataset-fashion-mnist``, written as JPEGs by
``image_data.make_demo`` and decoded once into ``.npz`` files by
``image_data.in_memory``, which ``train_imagenet.py`` reads as train/val.
"""

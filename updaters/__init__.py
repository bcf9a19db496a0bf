"""Updaters: micro-batch accumulation and the non-finite update policy."""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from updaters.micro_batch_updater import MicroBatchUpdater  # NOQA

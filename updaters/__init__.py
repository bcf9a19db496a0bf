"""Updaters: micro-batch accumulation and the non-finite update policy."""
from updaters.micro_batch_updater import MicroBatchUpdater  # NOQA

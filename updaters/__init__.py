"""Updaters: micro-batch accumulation and the non-finite update policy."""
from updaters.micro_batch_updater import broadcast_initial_parameters  # NOQA
from updaters.micro_batch_updater import MicroBatchUpdater  # NOQA

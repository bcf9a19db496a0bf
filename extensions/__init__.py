"""Trainer extensions: evaluation, throughput, schedules, BN statistics."""
from extensions.evaluator import DistributedEvaluator  # NOQA
from extensions.throughput import Throughput  # NOQA

"""Trainer extensions: evaluation, throughput, the schedules' extension, BN
statistics, reports and TensorBoard events."""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from extensions.evaluator import DistributedEvaluator  # NOQA
from extensions.final_batch_statistics import SyncFinalBatchStatistics  # NOQA
from extensions.hyperparameter_schedule import add_schedules  # NOQA
from extensions.hyperparameter_schedule import HyperparameterSchedule  # NOQA
from extensions.throughput import Throughput  # NOQA
from extensions.triggers import AnyOfTriggers  # NOQA
from extensions.reports import add_reports  # NOQA
from extensions.tensorboard import TensorBoardReport  # NOQA

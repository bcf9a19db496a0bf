"""Model definitions."""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from models import chainer_layers  # NOQA
from models.builder import ARCHS as archs  # NOQA
from models.builder import BN_STATS  # NOQA
from models.builder import build_classifier  # NOQA
from models.builder import ClassifierSpec  # NOQA
from models.final_batch_normalization import FinalBatchNormalization  # NOQA
from models.inference import plain_copy  # NOQA
from models.label_smoothing import label_smoothed_cross_entropy  # NOQA
from models.mixed_precision import MixedPrecision  # NOQA
from models import saved_model  # NOQA
from models.resnet50 import ResNet50  # NOQA
from models.resnet50 import zero_init_residual  # NOQA

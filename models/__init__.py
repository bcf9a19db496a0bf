"""Model definitions."""
from models.final_batch_normalization import FinalBatchNormalization  # NOQA
from models.final_batch_normalization import sync_final_batch_statistics  # NOQA
from models.resnet50 import ResNet50  # NOQA

archs = {
    'resnet50': ResNet50,
}

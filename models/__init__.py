"""Model definitions."""
from models.resnet50 import ResNet50  # NOQA

archs = {
    'resnet50': ResNet50,
}

"""The embedded demo dataset (a Fashion-MNIST subset in class folders)."""
import os

DEMO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'demo')
TRAIN_DIR = os.path.join(DEMO_ROOT, 'train')
VAL_DIR = os.path.join(DEMO_ROOT, 'val')
#: Fashion-MNIST's classes, numbered so that sorted folder names keep labels.
CLASS_NAMES = ['0_tshirt_top', '1_trouser', '2_pullover', '3_dress', '4_coat',
               '5_sandal', '6_shirt', '7_sneaker', '8_bag', '9_ankle_boot']
#: Demo defaults: 28x28 images resized to 37 and cropped to 32 (ResNet-50's
#: smallest input), a few epochs on 3,000 images.
CROP_SIZE = 32

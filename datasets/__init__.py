"""Input pipeline: ImageNet layouts, transforms and the training iterator."""
import chainer_compat  # NOQA: F401  (before chainer: NumPy 2, Python 3.12)
from errors import InputError  # NOQA
from datasets.global_order_iterator import GlobalOrderIterator  # NOQA
from datasets.broadcast import broadcast_index  # NOQA
from datasets.broadcast import load_datasets  # NOQA
from datasets.broadcast import load_index  # NOQA
from datasets.image_index import ImageIndex  # NOQA
from datasets.image_list import check_labels  # NOQA
from datasets.image_list import class_names_of  # NOQA
from datasets.image_list import read_class_folders  # NOQA
from datasets.image_list import read_datasets  # NOQA
from datasets.image_list import read_list_file  # NOQA
from datasets.transforms import load_mean  # NOQA
from datasets.transforms import resize_for  # NOQA
from datasets.transforms import TrainTransform  # NOQA
from datasets.transforms import ValTransform  # NOQA
from datasets.converter import SkippingConverter  # NOQA
from datasets.decoding import DECODERS  # NOQA
from datasets.decoding import UndecodableImageError  # NOQA
from datasets.validation import validation_iterator  # NOQA
from datasets.fingerprint import fingerprint  # NOQA
from datasets.broadcast import class_count_source  # NOQA

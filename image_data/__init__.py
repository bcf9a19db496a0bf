"""Input pipeline: ImageNet layouts, transforms and the training iterator."""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from largebatch.errors import InputError  # NOQA
from image_data.global_order_iterator import GlobalOrderIterator  # NOQA
from image_data.broadcast import broadcast_index  # NOQA
from image_data.broadcast import load_datasets  # NOQA
from image_data.broadcast import load_index  # NOQA
from image_data.image_index import ImageIndex  # NOQA
from image_data.image_list import check_labels  # NOQA
from image_data.image_list import class_names_of  # NOQA
from image_data.image_list import read_class_folders  # NOQA
from image_data.image_list import read_datasets  # NOQA
from image_data.image_list import read_list_file  # NOQA
from image_data.transforms import load_mean  # NOQA
from image_data.transforms import resize_for  # NOQA
from image_data.transforms import TrainTransform  # NOQA
from image_data.transforms import ValTransform  # NOQA
from image_data.converter import SkippingConverter  # NOQA
from image_data.decoding import DECODERS  # NOQA
from image_data.decoding import UndecodableImageError  # NOQA
from image_data.validation import validation_iterator  # NOQA
from image_data.fingerprint import fingerprint  # NOQA
from image_data.broadcast import class_count_source  # NOQA

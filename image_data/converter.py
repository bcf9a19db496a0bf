"""Batch conversion that drops the images a transform could not decode."""
import chainer

from largebatch.errors import InputError


class SkippingConverter(object):
    """``concat_examples`` over the examples that are not None.

    ``skipped`` counts the dropped examples; each call reports the running
    total as ``skipped_images``. ``normalize`` (e.g. a transform's
    ``normalize_batch``) turns the images on the device into the network's
    input: the batch then travels as uint8.
    """

    def __init__(self, normalize=None):
        self.skipped = 0
        self.normalize = normalize

    def __call__(self, batch, device=None):
        valid = [example for example in batch if example is not None]
        if len(valid) < len(batch):
            self.skipped += len(batch) - len(valid)
            chainer.report({'skipped_images': self.skipped})
        if not valid:
            raise InputError('every image of a minibatch failed to decode')
        arrays = chainer.dataset.concat_examples(valid, device)
        if self.normalize is None:
            return arrays
        x, t = arrays
        return self.normalize(x), t

"""A training iterator that walks one global, seeded order on every worker.

Every update consumes the next ``batch_size x micro_batches x n_workers``
indices of a per-epoch permutation that all workers compute from the same
seed; worker ``rank`` loads its own ``micro_batches`` slices of that total
minibatch. So each epoch uses every training image exactly once across all
workers, ``epoch_detail`` (= images consumed / training-set size) is the same
on every worker, and the state to snapshot is just ``(epoch, position)``.
Augmentation draws from a generator seeded by ``(seed, epoch, index)``, so a
sample is augmented identically whichever process loads it, and a resumed
run sees exactly the images it would have seen.
"""
import chainer
import numpy

from largebatch.errors import InputError
from largebatch.errors import ParameterError
from image_data.loaders import LoaderPool


def _load_example(context, task):
    """``context``: (dataset, transform); ``task``: (index, rng entropy)."""
    (dataset, transform), (index, entropy) = context, task
    return transform(dataset[index], numpy.random.default_rng(entropy))


class GlobalOrderIterator(chainer.dataset.Iterator):
    """Micro-batches of this worker's share of a global shuffled order.

    Args:
        dataset: the whole training set (the same on every worker).
        batch_size: images per micro-batch (the per-GPU batch; 32 in the
            paper).
        transform: ``transform(example, rng) -> example``.
        rank, n_workers: this worker and the number of workers.
        micro_batches: micro-batches per update on each worker (virtual
            workers); one ``next()`` returns one micro-batch.
        seed: seed of the order and of the augmentation.
        n_processes: loader processes (:class:`image_data.loaders.
            LoaderPool`; 0 loads in this process). The next micro-batch is
            prefetched while the current one is trained on.
    """

    def __init__(self, dataset, batch_size, transform, rank=0, n_workers=1,
                 micro_batches=1, seed=0, n_processes=0):
        self._pool = None
        per_update = batch_size * micro_batches
        for name, value in (('batch_size', batch_size),
                            ('micro_batches', micro_batches)):
            if value <= 0:
                raise ParameterError(name, value, 'positive')
        if per_update * n_workers > len(dataset):
            raise InputError(
                'total minibatch {} ({} images x {} micro-batches x {} '
                'workers) is larger than the training set ({} images)'.format(
                    per_update * n_workers, batch_size, micro_batches,
                    n_workers, len(dataset)))
        self.dataset = dataset
        self.batch_size = batch_size
        self.transform = transform
        self.rank = rank
        self.n_workers = n_workers
        self.micro_batches = micro_batches
        self.seed = seed
        self.total_batch_size = per_update * n_workers
        self.epoch = 0
        self.position = 0
        self.is_new_epoch = False
        self._previous_epoch_detail = -1.
        self._micro_batch = 0
        self._update_start = (0, 0)
        self._orders = {}
        self._pending = None
        self._pool = LoaderPool(n_processes, _load_example,
                                (dataset, transform))

    @property
    def epoch_detail(self):
        return self.epoch + self.position / len(self.dataset)

    @property
    def previous_epoch_detail(self):
        if self._previous_epoch_detail < 0:
            return None
        return self._previous_epoch_detail

    def _order(self, epoch):
        if epoch not in self._orders:
            rng = numpy.random.default_rng([self.seed, epoch])
            self._orders = {e: o for e, o in self._orders.items()
                            if e >= epoch - 1}
            self._orders[epoch] = rng.permutation(len(self.dataset))
        return self._orders[epoch]

    def _update_indices(self, epoch, position):
        """Indices and epochs of the total minibatch at ``(epoch, position)``,
        and the ``(epoch, position)`` that follows it."""
        indices, epochs = [], []
        need = self.total_batch_size
        while need:
            take = self._order(epoch)[position:position + need]
            indices.append(take)
            epochs.append(numpy.full(len(take), epoch))
            need -= len(take)
            position += len(take)
            if position == len(self.dataset):
                epoch, position = epoch + 1, 0
        return numpy.concatenate(indices), numpy.concatenate(epochs), \
            (epoch, position)

    def _tasks(self, start, micro_batch):
        """``(index, rng entropy)`` of one micro-batch of this worker."""
        indices, epochs, _ = self._update_indices(*start)
        k = self.rank * self.micro_batches + micro_batch
        sl = slice(k * self.batch_size, (k + 1) * self.batch_size)
        return [(int(i), (self.seed, int(e), int(i)))
                for i, e in zip(indices[sl], epochs[sl])]

    def _submit(self, key):
        return key, self._pool.submit(self._tasks(*key))

    def __next__(self):
        if self._micro_batch == 0:
            self._previous_epoch_detail = self.epoch_detail
            self._update_start = (self.epoch, self.position)
            _, _, (epoch, position) = self._update_indices(*self._update_start)
            self.is_new_epoch = epoch > self.epoch
            self.epoch, self.position = epoch, position
        key = (self._update_start, self._micro_batch)
        pending, self._pending = self._pending, None
        if pending is None or pending[0] != key:
            pending = self._submit(key)
        self._micro_batch = (self._micro_batch + 1) % self.micro_batches
        if self._micro_batch:
            self._pending = self._submit((self._update_start,
                                          self._micro_batch))
        else:
            self._pending = self._submit(((self.epoch, self.position), 0))
        return pending[1].get()

    next = __next__

    def serialize(self, serializer):
        self.epoch = serializer('epoch', self.epoch)
        self.position = serializer('position', self.position)
        self.is_new_epoch = serializer('is_new_epoch', self.is_new_epoch)
        self._previous_epoch_detail = serializer(
            'previous_epoch_detail', self._previous_epoch_detail)
        if self.position >= len(self.dataset):
            # a snapshot of a larger training set (--allow-new-dataset):
            # its epoch goes on past this set's end, so the next one starts
            self.epoch, self.position = self.epoch + 1, 0
        self._micro_batch = 0
        self._pending = None

    def finalize(self):
        if self._pool is not None:
            self._pool.close()
            self._pool = None

import pytest

import chainer
from largebatch import errors
import image_data


def index_transform(example, rng):
    return example, rng.random()


def run(n_workers, n, batch, updates, micro_batches=1, seed=0, **kw):
    """Indices each worker sees per update, and their augmentation draws."""
    its = [image_data.GlobalOrderIterator(
        list(range(n)), batch, index_transform, rank=r, n_workers=n_workers,
        micro_batches=micro_batches, seed=seed, **kw)
        for r in range(n_workers)]
    seen = []
    for _ in range(updates):
        seen.append([[x for _ in range(micro_batches) for x in next(it)]
                     for it in its])
    return its, seen


def test_every_image_once_per_epoch_across_workers():
    n, batch, workers = 23, 2, 3  # 23 is not a multiple of 6
    its, seen = run(workers, n, batch, updates=23)  # 6 epochs of images
    flat = [i for update in seen for worker in update for i, _ in worker]
    for epoch in range(6):
        assert sorted(flat[epoch * n:(epoch + 1) * n]) == list(range(n))
    assert len({it.epoch_detail for it in its}) == 1
    assert its[0].epoch_detail == pytest.approx(23 * 6 / 23)


def test_epoch_bookkeeping_matches_serial_iterator():
    its, _ = run(1, 10, 4, updates=0)
    it = its[0]
    ref = chainer.iterators.SerialIterator(list(range(10)), 4)
    for _ in range(7):
        next(it), next(ref)
        assert (it.epoch, it.is_new_epoch) == (ref.epoch, ref.is_new_epoch)
        assert it.epoch_detail == pytest.approx(ref.epoch_detail)
        assert it.previous_epoch_detail == pytest.approx(
            ref.previous_epoch_detail)


def test_micro_batches_are_slices_of_the_same_total_minibatch():
    _, one = run(1, 40, 3, updates=5, micro_batches=4)
    _, four = run(4, 40, 3, updates=5, micro_batches=1)
    _, two = run(2, 40, 3, updates=5, micro_batches=2)
    for a, b, c in zip(one, four, two):
        assert a[0] == sum(b, []) == sum(c, [])


def test_augmentation_depends_on_seed_epoch_and_index_only():
    _, a = run(2, 16, 4, updates=6)
    _, b = run(1, 16, 8, updates=6)
    draws_a = {i_d for u in a for w in u for i_d in w}
    draws_b = {i_d for u in b for w in u for i_d in w}
    assert draws_a == draws_b
    _, c = run(1, 16, 8, updates=6, seed=1)
    assert c != b


def test_serialized_state_resumes_the_same_sequence(tmp_path):
    its, _ = run(2, 17, 3, updates=4)
    path = str(tmp_path / 'it.npz')
    chainer.serializers.save_npz(path, its[1])
    rest = [next(its[1]) for _ in range(8)]
    fresh = image_data.GlobalOrderIterator(
        list(range(17)), 3, index_transform, rank=1, n_workers=2)
    chainer.serializers.load_npz(path, fresh)
    assert [next(fresh) for _ in range(8)] == rest
    assert fresh.epoch_detail == its[1].epoch_detail


def test_a_state_past_a_smaller_sets_end_starts_its_next_epoch(tmp_path):
    """A snapshot of a larger training set, resumed on a smaller one
    (--allow-new-dataset): the run goes on at the next epoch's start."""
    its, _ = run(1, 40, 3, updates=10)  # position 30 of epoch 0
    path = str(tmp_path / 'it.npz')
    chainer.serializers.save_npz(path, its[0])
    smaller = image_data.GlobalOrderIterator(list(range(12)), 3,
                                             index_transform)
    chainer.serializers.load_npz(path, smaller)
    assert (smaller.epoch, smaller.position) == (1, 0)
    assert sorted(i for _ in range(4) for i, draw in next(smaller)) == list(
        range(12))
    assert smaller.epoch_detail == 2


def test_loader_processes_give_the_same_batches():
    _, here = run(2, 13, 2, updates=9)
    its, pooled = run(2, 13, 2, updates=9, n_processes=2)
    for it in its:
        it.finalize()
    assert pooled == here


def test_total_minibatch_larger_than_dataset_is_refused():
    with pytest.raises(errors.InputError, match='larger than the training'):
        image_data.GlobalOrderIterator(list(range(10)), 4, index_transform,
                                       rank=0, n_workers=3)


@pytest.mark.parametrize('batch_size, micro_batches, name', [
    (0, 1, 'batch_size'), (2, 0, 'micro_batches')])
def test_sizes_must_be_positive(batch_size, micro_batches, name):
    with pytest.raises(errors.ParameterError) as e:
        image_data.GlobalOrderIterator(list(range(10)), batch_size,
                                       index_transform,
                                       micro_batches=micro_batches)
    assert (e.value.name, e.value.expected) == (name, 'positive')

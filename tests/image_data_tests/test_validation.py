"""image_data.validation: each image in exactly one worker's shard."""
import pytest

from image_data import validation


@pytest.mark.parametrize('n, size', [(10, 3), (7, 2), (1, 2), (0, 3),
                                     (5, 5), (64, 4), (3, 8)])
def test_shards_are_disjoint_contiguous_and_cover_the_set(n, size):
    pairs = [('{}.jpg'.format(i), i % 3) for i in range(n)]
    shards = [validation.validation_shard(pairs, rank, size)
              for rank in range(size)]
    assert [p for shard in shards for p in shard] == pairs
    lengths = [len(shard) for shard in shards]
    assert max(lengths) - min(lengths) <= 1


@pytest.mark.parametrize('limit, expected', [
    (4, [0, 2, 5, 7]), (5, [0, 2, 4, 6, 8]), (64, list(range(10))),
    (0, [])])
def test_limit_spreads_over_the_set(limit, expected):
    pairs = list(range(10))
    shards = [validation.validation_shard(pairs, rank, 3, limit)
              for rank in range(3)]
    assert [p for shard in shards for p in shard] == expected


def test_a_limited_shard_samples_every_class_of_a_class_ordered_set():
    pairs = [(i, i // 100) for i in range(1000)]  # 10 classes in order
    shards = [validation.validation_shard(pairs, rank, 2, 64)
              for rank in range(2)]
    labels = [label for shard in shards for _, label in shard]
    assert len(labels) == 64 and set(labels) == set(range(10))


def times_ten(pair):
    return pair[0] * 10, pair[1]


@pytest.mark.parametrize('n_processes', [0, 1])
def test_iterator_makes_one_pass_over_the_transformed_shard(n_processes):
    pairs = [(i, i % 2) for i in range(11)]
    it = validation.validation_iterator(
        pairs, 1, 2, times_ten, 2, n_processes=n_processes, limit=5)
    try:
        batches = list(it)
    finally:
        it.finalize()
    seen = [x for batch in batches for x, _ in batch]
    assert seen == [40, 60, 80]  # rank 1's share of pairs 0, 2, 4, 6, 8
    assert [len(batch) for batch in batches] == [2, 1]

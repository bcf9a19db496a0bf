import numpy

from benchmarks import loader_pool
from benchmarks.photos import write_photos


def test_both_pools_give_the_same_images(tmp_path):
    makers = loader_pool.pools(write_photos(str(tmp_path), 3), 2, 32)
    batches = {}
    for name, make in makers.items():
        pool = make()
        try:
            batches[name] = pool.submit(list(range(7))).get()
        finally:
            pool.close()
    assert len(batches['Pool']) == 7
    for new, old in zip(batches['LoaderPool'], batches['Pool']):
        for a, b in zip(new, old):
            numpy.testing.assert_array_equal(a, b)


def test_prints_each_pool_s_rate_and_the_ratio(capsys):
    loader_pool.main(['--rounds', '2', '--batches', '2', '--batchsize', '4',
                      '--crop-size', '32'])
    out = capsys.readouterr().out
    assert '  LoaderPool images/s: median ' in out
    assert '  Pool       images/s: median ' in out
    assert '  LoaderPool / Pool: median ' in out

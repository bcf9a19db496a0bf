"""MicroBatchUpdater: K micro-batches make one update."""
import chainer
import chainer.links as L
import numpy
import pytest

from half_precision import scaling
import updaters

MICRO_BATCHES = 3


class GradientRecord(object):
    """An optimizer hook that keeps a copy of every gradient it sees."""
    name = 'GradientRecord'
    call_for_each_param = False
    timing = 'pre'

    def __init__(self):
        self.grads = None

    def __call__(self, optimizer):
        self.grads = {name: None if param.grad is None else
                      param.grad.copy() for name, param
                      in optimizer.target.namedparams()}


class Net(chainer.Chain):
    """Linear, BN, linear; ``unused`` takes no part in the loss."""

    def __init__(self):
        super(Net, self).__init__()
        with self.init_scope():
            self.fc1 = L.Linear(5, 4)
            self.bn = L.BatchNormalization(4)
            self.fc2 = L.Linear(4, 3)
            self.unused = L.Linear(5, 2)

    def forward(self, x):
        return self.fc2(self.bn(self.fc1(x)))


def update(updater, model):
    """One update, reported the way the trainer reports it."""
    reporter = chainer.reporter.Reporter()
    reporter.add_observer('main', model)
    with reporter.scope({}):
        updater.update()


def make_model():
    numpy.random.seed(0)
    return L.Classifier(Net())


def data(n):
    rng = numpy.random.RandomState(1)
    return [(rng.randn(5).astype(numpy.float32), numpy.int32(i % 3))
            for i in range(n)]


def grads_by_backward_accumulation(examples, batch):
    """Chainer's own accumulation: K backward passes without clearing."""
    model = make_model()
    model.cleargrads()
    for i in range(0, len(examples), batch):
        x, t = chainer.dataset.concat_examples(examples[i:i + batch])
        (model(x, t) / (len(examples) // batch)).backward()
    return {name: param.grad for name, param in model.namedparams()}


def recorded_update(examples, batch, **updater_options):
    """One update of a fresh model by the micro-batch updater over
    ``examples``; the gradients the optimizer saw."""
    model = make_model()
    optimizer = chainer.optimizers.SGD(lr=0.1)
    optimizer.setup(model)
    record = GradientRecord()
    optimizer.add_hook(record)
    iterator = chainer.iterators.SerialIterator(examples, batch,
                                                shuffle=False)
    updater = updaters.MicroBatchUpdater(
        iterator, optimizer, chainer.dataset.concat_examples, -1,
        **updater_options)
    update(updater, model)
    return record


@pytest.mark.parametrize('micro_batches', [1, MICRO_BATCHES])
def test_gradients_are_the_sums_chainer_would_accumulate(micro_batches):
    batch = 4
    examples = data(batch * micro_batches)
    record = recorded_update(examples, batch, micro_batches=micro_batches)
    expected = grads_by_backward_accumulation(examples, batch)
    assert record.grads.keys() == expected.keys()
    for name, grad in expected.items():
        # The same additions in the same order: equal to the last bit.
        assert (grad is None) == (name.startswith('/predictor/unused/'))
        if grad is None:  # the optimizer fills a cleared gradient with 0
            assert not record.grads[name].any(), name
            continue
        numpy.testing.assert_array_equal(record.grads[name], grad,
                                         err_msg=name)


def test_rounded_workers_round_each_micro_batch_as_a_float16_worker():
    batch, workers = 4, 2 * MICRO_BATCHES
    examples = data(batch * MICRO_BATCHES)
    record = recorded_update(examples, batch, micro_batches=MICRO_BATCHES,
                             rounded_workers=workers)
    # each micro-batch's gradient on its own, rounded, then summed
    reference = make_model()
    expected, unrounded = {}, {}
    for i in range(0, len(examples), batch):
        reference.cleargrads()
        x, t = chainer.dataset.concat_examples(examples[i:i + batch])
        (reference(x, t) / MICRO_BATCHES).backward()
        named = [(n, p) for n, p in reference.namedparams()
                 if p.grad is not None]
        for name, param in named:
            unrounded[name] = unrounded.get(name, 0) + param.grad
        scaling.round_as_worker([p.grad for _, p in named], workers)
        for name, param in named:
            expected[name] = (param.grad if name not in expected
                              else expected[name] + param.grad)
    for name, grad in expected.items():
        numpy.testing.assert_array_equal(record.grads[name], grad,
                                         err_msg=name)
    changed = [name for name in expected
               if not numpy.array_equal(expected[name], unrounded[name])]
    assert changed, 'no gradient met a float16 rounding'

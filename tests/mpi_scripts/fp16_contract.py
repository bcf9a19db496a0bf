"""What every float16 communicator does, on the workers of an MPI job.

ChainerMN's communicator contract (broadcast, mean, missing and zero-filled
gradients; float32 and float16 models), the range of the scaled float16
sum over gradient magnitudes from 1e-7 to 1e2, and the non-finite check.
``run(comm, device)`` prints ``ok <check>`` for each check that passed on
this rank; ``CHECKS`` lists them.
"""
import functools

from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
import chainer
import chainermn
import numpy

from largebatch import errors
from half_precision import scaling

CHECKS = ['ok mean float32', 'ok mean float16', 'ok magnitudes',
          'ok large float32', 'ok large float16', 'ok non-finite nan',
          'ok non-finite inf', 'ok optimizer', 'ok missing float32',
          'ok missing float16', 'ok broadcast float32',
          'ok broadcast float16']


class Grads(chainer.Chain):
    """Parameters '/a' (n,), '/b' (2, 3) and '/c/W' (3,) of ``dtype``."""

    def __init__(self, n, dtype=numpy.float32):
        super(Grads, self).__init__()
        with self.init_scope():
            self.a = chainer.Parameter(numpy.zeros(n, dtype))
            self.b = chainer.Parameter(numpy.zeros((2, 3), dtype))
            self.c = chainer.Link()
            with self.c.init_scope():
                self.c.W = chainer.Parameter(numpy.zeros(3, dtype))


class _Checks(object):

    def __init__(self, comm, device):
        self.comm, self.device = comm, device
        self.rank, self.size = comm.rank, comm.size

    def model(self, n, dtype=numpy.float32):
        model = Grads(n, dtype)
        model.to_device(self.device)
        return model

    def set_grads(self, model, grads):
        """``grads``: {path: NumPy array} or one value for every element."""
        for name, param in model.namedparams():
            value = grads[name] if isinstance(grads, dict) else grads
            param.grad = self.device.send(
                numpy.broadcast_to(value, param.shape).astype(param.dtype))

    def host(self, array):
        return chainer.backend.CpuDevice().send(array)

    def gather(self, model):
        """{path: every worker's gradient stacked, float64}."""
        mine = {name: self.host(p.grad) for name, p in model.namedparams()}
        every = self.comm.mpi_comm.allgather(mine)
        return {name: numpy.stack([g[name] for g in every]).astype(
            numpy.float64) for name in mine}

    def same_everywhere(self, array):
        return all(numpy.array_equal(array, other)
                   for other in self.comm.mpi_comm.allgather(array))

    def mean(self, dtype):
        """The mean is within float16's rounding of the float64 mean, and
        bit-identical on every worker."""
        rng = numpy.random.RandomState(self.rank)
        low = -4 if dtype == numpy.float32 else -3
        for n in sorted({1, max(self.size - 1, 1), self.size + 1, 7, 1001}):
            model = self.model(n, dtype)
            self.set_grads(model, {
                name: rng.standard_normal(p.shape)
                * 10. ** rng.randint(low, 3, p.shape)
                for name, p in model.namedparams()})
            stacks = self.gather(model)
            self.comm.multi_node_mean_grad(model)
            for name, param in model.namedparams():
                stack = stacks[name]
                s = float(scaling.scales(numpy.array(
                    [numpy.abs(stack).max()], numpy.float32), self.size)[0])
                # p roundings of partial sums of at most sum|g| s, each
                # within 2^-11 of it or 2^-25 below the normal range; then
                # the float32 product, and for float16 the last rounding.
                last = 2. ** -11 if dtype == numpy.float16 else 2. ** -23
                bound = (2. ** -11 * numpy.abs(stack).sum(0)
                         + 2. ** -25 / s + last * numpy.abs(stack.mean(0))
                         + (2. ** -25 if dtype == numpy.float16 else 0.))
                got = self.host(param.grad)
                error = numpy.abs(got - stack.mean(0))
                assert (error <= bound).all(), (n, name, (error / bound).max())
                assert got.dtype == dtype
                assert self.same_everywhere(got), (n, name)
        print('ok mean {}'.format(numpy.dtype(dtype).name))

    def magnitudes(self):
        """Elements from 1e-7 to 1e2 in one parameter ('/a'), every worker's
        element within a factor of 1.5 of a shared magnitude, one sign: no
        overflow, no element whose scaled sum is a float16 normal flushed
        to zero, p99 relative error at most 2e-3 from 1e-6 up."""
        n = 100000
        shared = numpy.random.RandomState(1234)
        magnitude = 10. ** shared.uniform(-7, 2, n)
        magnitude[:2] = 1e-7, 1e2
        sign = numpy.where(shared.rand(n) < 0.5, -1., 1.)
        own = numpy.random.RandomState(self.rank).uniform(0.5, 1.5, n)
        model = self.model(n)
        self.set_grads(model, {'/a': sign * magnitude * own,
                               '/b': 1e-6, '/c/W': 3e-7})
        stacks = self.gather(model)
        self.comm.multi_node_mean_grad(model)
        stack = stacks['/a']
        exact = stack.mean(0)
        got = self.host(model.a.grad).astype(numpy.float64)
        assert numpy.isfinite(got).all()
        s = float(scaling.scales(numpy.array(
            [numpy.abs(stack).max()], numpy.float32), self.size)[0])
        normal = numpy.abs(exact * self.size * s) >= 2. ** -14
        assert normal.sum() > n // 2
        assert (got[normal] != 0).all(), numpy.count_nonzero(
            got[normal] == 0)
        relative = numpy.abs(got - exact) / numpy.abs(exact)
        p99 = numpy.percentile(relative[numpy.abs(exact) >= 1e-6], 99)
        assert p99 <= 2e-3, p99
        # parameters of small gradients get their own, larger scale
        for name, param in model.namedparams():
            if name != '/a':
                numpy.testing.assert_allclose(
                    self.host(param.grad), stacks[name].mean(0),
                    rtol=2. ** -10)
        if self.rank == 0:
            print('magnitudes: p99 relative error {:.2e} from 1e-6 up, '
                  '{} workers'.format(p99, self.size))
        print('ok magnitudes')

    def large(self, dtype):
        """Gradients whose unscaled float16 sum overflows stay finite."""
        value = 4e4 if dtype == numpy.float32 else 2.4e4
        model = self.model(5, dtype)
        self.set_grads(model, value)
        self.comm.multi_node_mean_grad(model)
        for _, param in model.namedparams():
            assert (self.host(param.grad) == value).all(), param.grad
        print('ok large {}'.format(numpy.dtype(dtype).name))

    def non_finite(self, bad_value):
        """Every worker raises, naming the count and the first parameter,
        and leaves the gradients as they were."""
        model = self.model(4)
        grads = {name: numpy.ones(p.shape) for name, p in
                 model.namedparams()}
        if self.rank == self.size - 1:
            grads['/b'][1, 2] = bad_value
            grads['/c/W'][0] = bad_value
        self.set_grads(model, grads)
        before = {name: self.host(p.grad).copy()
                  for name, p in model.namedparams()}
        try:
            self.comm.multi_node_mean_grad(model)
        except errors.NonFiniteGradientError as e:
            assert isinstance(e, ValueError)  # ChainerMN's convention
            assert 'diverged' in str(e)
            assert (e.count, e.param_name) == (2, '/b'), str(e)
            assert '\n' not in str(e) and '/b' in str(e)
        else:
            raise AssertionError('non-finite mean not detected')
        for name, param in model.namedparams():
            numpy.testing.assert_array_equal(self.host(param.grad),
                                             before[name])
        print('ok non-finite {}'.format(bad_value))

    def optimizer(self):
        """ChainerMN's multi-node optimizer skips a non-finite update."""
        model = self.model(3)
        optimizer = chainermn.create_multi_node_optimizer(
            chainer.optimizers.SGD(lr=1.), self.comm)
        optimizer.setup(model)
        self.set_grads(model, 0.5)
        optimizer.update()  # the first call only broadcasts the parameters
        self.set_grads(model, 0.5)
        optimizer.update()
        assert (self.host(model.a.array) == -0.5).all(), model.a.array
        self.set_grads(model, numpy.nan if self.rank == 0 else 0.5)
        try:
            optimizer.update()
        except errors.NonFiniteGradientError:
            pass
        else:
            raise AssertionError('update with a NaN mean was applied')
        assert (self.host(model.a.array) == -0.5).all(), model.a.array
        print('ok optimizer')

    def missing(self, dtype):
        """A missing gradient stays missing, or is averaged as zeros with
        ``zero_fill``; the others are averaged either way."""
        model = self.model(2, dtype)
        self.set_grads(model, 2. * (self.rank + 1))
        model.c.W.grad = None
        self.comm.multi_node_mean_grad(model)
        assert model.c.W.grad is None
        close = functools.partial(numpy.testing.assert_allclose,
                                  rtol=2. ** -11)
        close(self.host(model.a.grad), self.size + 1.)
        self.set_grads(model, 2. * (self.rank + 1))
        model.c.W.grad = None
        self.comm.multi_node_mean_grad(model, zero_fill=True)
        assert self.host(model.c.W.grad).dtype == dtype
        assert (self.host(model.c.W.grad) == 0).all()
        close(self.host(model.b.grad), self.size + 1.)
        if self.rank == 0:  # zero-filled here, given elsewhere
            model.a.grad = None
        else:
            self.set_grads(model, float(self.size))
        self.comm.multi_node_mean_grad(model, zero_fill=True)
        close(self.host(model.a.grad), self.size - 1.)
        print('ok missing {}'.format(numpy.dtype(dtype).name))

    def broadcast(self, dtype):
        """``bcast_data`` gives every worker rank 0's parameters."""
        model = self.model(3, dtype)
        for _, param in model.namedparams():
            param.array[...] = self.rank + 1
        self.comm.bcast_data(model)
        for _, param in model.namedparams():
            assert self.host(param.array).dtype == dtype
            assert (self.host(param.array) == 1).all(), param.array
        print('ok broadcast {}'.format(numpy.dtype(dtype).name))


def run(comm, device):
    checks = _Checks(comm, device)
    for dtype in (numpy.float32, numpy.float16):
        checks.mean(dtype)
    checks.magnitudes()
    for dtype in (numpy.float32, numpy.float16):
        checks.large(dtype)
    checks.non_finite(numpy.nan)
    checks.non_finite(numpy.inf)
    checks.optimizer()
    for dtype in (numpy.float32, numpy.float16):
        checks.missing(dtype)
        checks.broadcast(dtype)

"""The equations of the package's docstring: time per iteration, time to
train, and the bandwidth a measured all-reduce implies."""
import collections
import dataclasses

from studies.scaling_model.hardware import Workload


class IterationTime(collections.namedtuple(
        'IterationTime', 'compute load host_to_device intra inter')):
    """Seconds spent by each part of one iteration."""

    __slots__ = ()

    @property
    def worker(self):
        """One worker's own part: max(compute, load) + host_to_device."""
        return max(self.compute, self.load) + self.host_to_device

    @property
    def total(self):
        return self.worker + self.intra + self.inter


class Prediction(collections.namedtuple(
        'Prediction', 'gpus nodes iteration iterations seconds '
                      'efficiency_gpu efficiency_node')):
    """One row of a scaling table: ``iteration`` is an IterationTime,
    ``seconds`` the time to train, efficiencies against one GPU and one
    node."""

    __slots__ = ()


def ring_reduce_scatter_time(p, nbytes, bandwidth, latency):
    """A ring reduce-scatter (or all-gather) of ``nbytes`` over ``p``
    members: p - 1 steps of nbytes / p each, (p-1)/p nbytes / B + (p-1) a."""
    return (p - 1) * (nbytes / p / bandwidth + latency)


def ring_allreduce_time(p, nbytes, bandwidth, latency):
    """A ring all-reduce: 2 (p-1)/p nbytes / bandwidth + 2 (p-1) latency."""
    return 2 * ring_reduce_scatter_time(p, nbytes, bandwidth, latency)


def layout(gpus, gpus_per_node):
    """GPUs in each node and the number of nodes for a job of ``gpus``."""
    if gpus < 1:
        raise ValueError('the number of GPUs must be positive, got {}'
                         .format(gpus))
    return min(gpus, gpus_per_node), -(-gpus // gpus_per_node)


def cross_group_fraction(nodes, nodes_per_group, ring_order):
    """Fraction of a ring's node-to-node hops that leave the sender's group:
    (n - k)/(n - 1) for a ring blind to the groups, 1/k for one that walks
    each group in turn, 0 while the job fits in one group."""
    if nodes <= nodes_per_group:
        return 0.0
    if ring_order == 'grouped':
        return 1.0 / nodes_per_group
    return (nodes - nodes_per_group) / (nodes - 1)


def thin_tree_slowdown(nodes, cluster):
    """f >= 1 by which a group's uplinks slow the inter-node ring: its
    crossing traffic over their capacity, max(1, o x crossing fraction)."""
    return max(1.0, cluster.oversubscription * cross_group_fraction(
        nodes, cluster.nodes_per_group, cluster.ring_order))


def iteration_time(gpus, cluster, workload=Workload(), step_time=None):
    """The IterationTime of one iteration on ``gpus`` GPUs.

    ``step_time``, when given, is a measured per-worker iteration without
    communication (forward, backward, update, loading) that replaces the
    modelled compute, loading and host-to-device copy.
    """
    per_node, nodes = layout(gpus, cluster.gpus_per_node)
    if step_time is None:
        compute = workload.batch_per_gpu / cluster.images_per_s
        load = workload.batch_per_gpu * per_node / cluster.loader_images_per_s
        host_to_device = workload.input_bytes / cluster.host_to_device
    else:
        if not step_time > 0:
            raise ValueError('the step time must be positive, got {}'
                             .format(step_time))
        compute, load, host_to_device = step_time, 0.0, 0.0
    nbytes = workload.gradient_bytes
    intra = ring_allreduce_time(per_node, nbytes, cluster.intra_bandwidth,
                                cluster.intra_latency)
    # ``per_node`` rings of nbytes / per_node each share the node's links.
    ring_bandwidth = (cluster.node_bandwidth / per_node
                      / thin_tree_slowdown(nodes, cluster))
    inter = ring_allreduce_time(nodes, nbytes / per_node, ring_bandwidth,
                                cluster.inter_latency)
    return IterationTime(compute, load, host_to_device, intra, inter)


def iterations(gpus, workload=Workload()):
    """Iterations of ``workload.epochs`` epochs at ``gpus`` x batch_per_gpu
    images each (fractional: the data order is global, not per epoch)."""
    return workload.epochs * workload.train_images / (
        gpus * workload.batch_per_gpu)


def time_to_train(gpus, cluster, workload=Workload(), step_time=None):
    """Seconds to train ``workload.epochs`` epochs on ``gpus`` GPUs."""
    return iterations(gpus, workload) * iteration_time(
        gpus, cluster, workload, step_time).total


def predict(gpu_counts, cluster, workload=Workload(), step_time=None):
    """A Prediction for each GPU count, efficiencies against 1 GPU and one
    full node (None below a full node)."""
    def total(gpus):
        return iteration_time(gpus, cluster, workload, step_time).total
    one_gpu, one_node = total(1), total(cluster.gpus_per_node)
    rows = []
    for gpus in gpu_counts:
        t = iteration_time(gpus, cluster, workload, step_time)
        rows.append(Prediction(
            gpus, layout(gpus, cluster.gpus_per_node)[1], t,
            iterations(gpus, workload), iterations(gpus, workload) * t.total,
            one_gpu / t.total,
            one_node / t.total if gpus >= cluster.gpus_per_node else None))
    return rows


def bandwidth_from_allreduce(seconds, procs, nbytes, latency=0.0):
    """The ring bandwidth B for which ring_allreduce_time(procs, nbytes, B,
    latency) equals a measured ``seconds``."""
    if procs < 2:
        raise ValueError('a measured all-reduce needs at least 2 processes, '
                         'got {}'.format(procs))
    transfer = seconds - 2 * (procs - 1) * latency
    if not transfer > 0:
        raise ValueError(
            'the measured all-reduce time {} s is not above the ring\'s '
            'latency {} s'.format(seconds, 2 * (procs - 1) * latency))
    return 2 * (procs - 1) / procs * nbytes / transfer


def calibrate_allreduce(cluster, seconds, procs, nbytes):
    """``cluster`` with the bandwidth a measured all-reduce implies.

    Within one node (procs <= gpus_per_node) the measurement sets
    ``intra_bandwidth``; across nodes, what is left after the modelled
    intra-node stages sets ``node_bandwidth``.
    """
    per_node, nodes = layout(procs, cluster.gpus_per_node)
    if nodes == 1:
        field = 'intra_bandwidth'
        bandwidth = bandwidth_from_allreduce(seconds, procs, nbytes,
                                             cluster.intra_latency)
    else:
        intra = ring_allreduce_time(per_node, nbytes,
                                    cluster.intra_bandwidth,
                                    cluster.intra_latency)
        if not seconds > intra:
            raise ValueError(
                'the measured all-reduce time {} s is not above the '
                'modelled intra-node stages, {:.6f} s'.format(seconds, intra))
        field = 'node_bandwidth'
        bandwidth = per_node * thin_tree_slowdown(nodes, cluster) * (
            bandwidth_from_allreduce(seconds - intra, nodes,
                                     nbytes / per_node,
                                     cluster.inter_latency))
    sources = dict(cluster.sources, **{field: (
        'measured: all-reduce of {:g} bytes on {} processes in {:g} s'
        .format(nbytes, procs, seconds))})
    return dataclasses.replace(cluster, sources=sources, **{field: bandwidth})

#!/usr/bin/env python
"""Analytic model of the time to train ResNet-50 data-parallel on N GPUs.

One iteration of synchronous data-parallel SGD with ``b`` images per GPU,
``g`` GPUs in each of ``n`` nodes (N = g n) costs

    t_iter(N)   = max(t_compute, t_load) + t_h2d + t_intra + t_inter
    t_compute   = b / R                     R: one GPU's training images/s
    t_load      = b g / L                   L: a node's JPEG decode + augment
                                               images/s (loaders prefetch, so
                                               this hides unless it is slower)
    t_h2d       = b 3 c^2 4 / B_h2d         the float32 minibatch to the GPU

and the gradient all-reduce of S bytes (25,557,032 parameters x 2 bytes in
fp16, x 4 in fp32) is a hierarchical ring: a reduce-scatter inside each node,
an all-reduce of the 1/g shards between nodes (g rings side by side, sharing
the node's links), an all-gather inside each node:

    t_intra     = 2 (g-1)/g  S / B_intra     + 2 (g-1) a_intra
    t_inter     = 2 (n-1)/n  S f / B_node    + 2 (n-1) a_inter

``f`` >= 1 is the thin-tree slowdown: nodes hang in groups of ``k`` below
leaf switches whose uplinks carry 1/o of what the nodes can inject; a ring
hop leaves its group with probability (n - k)/(n - 1) when the ring order
ignores the groups (1/k when it follows them), so f = max(1, o x that).

Training E epochs of D images takes E D / (N b) iterations. Scaling
efficiency against a base of N0 GPUs is t_iter(N0) / t_iter(N): per-GPU
throughput relative to the base, at a fixed minibatch per GPU.

Run ``python -m benchmarks.scaling_model`` for the paper's MN-1 (Akiba et
al. 2017: 1024 P100s, 15 minutes), ``--preset h100`` for a modern cluster,
``--sources`` for every parameter with its source, ``--plot FILE.png`` for
a figure; ``--step-time`` and ``--allreduce-time`` feed in measured figures.
"""
import argparse
import collections
import dataclasses
import json
import math
import sys

RESNET50_PARAMETERS = 25557032
IMAGENET_TRAIN_IMAGES = 1281167
DTYPE_BYTES = {'float16': 2, 'float32': 4}
RING_ORDERS = ('random', 'grouped')

# Akiba, Suzuki & Fukuda (2017): 1024 GPUs, 32 images each, 90 epochs.
PAPER_GPUS = 1024
PAPER_SECONDS = 15 * 60
PAPER_ITERATION_SECONDS = 0.256
PAPER_EFFICIENCY_GPU = 0.70
PAPER_EFFICIENCY_NODE = 0.80


def link_bandwidth(links, gbit_per_s, efficiency):
    """Bytes/s that ``links`` network links of ``gbit_per_s`` signalling rate
    deliver, ``efficiency`` being line encoding x protocol overhead."""
    return links * gbit_per_s * 1e9 / 8 * efficiency


@dataclasses.dataclass(frozen=True)
class Cluster:
    """One cluster's hardware. Bandwidths in bytes/s, latencies in s.

    gpus_per_node: GPUs (training processes) per node.
    images_per_s: one GPU's training throughput (forward, backward and
        update) at the minibatch per GPU.
    intra_bandwidth, intra_latency: ring bandwidth and per-step latency
        between the GPUs of one node.
    node_bandwidth, inter_latency: what one node's network links deliver
        together, and the per-step latency of a ring between nodes.
    nodes_per_group, oversubscription: nodes under one leaf switch, and the
        ratio of their injection bandwidth to the leaf's uplinks (1: a full
        fat tree).
    ring_order: 'random' when the ring visits nodes regardless of their
        group, 'grouped' when it walks each group in turn.
    host_to_device: bytes/s of the minibatch copy to the GPU.
    loader_images_per_s: JPEG decode + augmentation throughput of a node's
        CPUs.
    sources: where each value comes from, by field name.
    """

    name: str
    description: str
    gpus_per_node: int
    images_per_s: float
    intra_bandwidth: float
    intra_latency: float
    node_bandwidth: float
    inter_latency: float
    nodes_per_group: int
    oversubscription: float
    ring_order: str
    host_to_device: float
    loader_images_per_s: float
    sources: dict = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self):
        if self.ring_order not in RING_ORDERS:
            raise ValueError('ring_order must be one of {}, got {!r}'.format(
                ', '.join(RING_ORDERS), self.ring_order))
        for name in ('gpus_per_node', 'images_per_s', 'intra_bandwidth',
                     'node_bandwidth', 'nodes_per_group', 'host_to_device',
                     'loader_images_per_s'):
            if not getattr(self, name) > 0:
                raise ValueError('{} must be positive, got {}'.format(
                    name, getattr(self, name)))
        for name in ('intra_latency', 'inter_latency'):
            if getattr(self, name) < 0:
                raise ValueError('{} must not be negative, got {}'.format(
                    name, getattr(self, name)))
        if self.oversubscription < 1:
            raise ValueError('oversubscription must be at least 1, got {}'
                             .format(self.oversubscription))


@dataclasses.dataclass(frozen=True)
class Workload:
    """What is trained: minibatch per GPU, epochs, data set, gradient."""

    batch_per_gpu: int = 32
    epochs: float = 90
    train_images: int = IMAGENET_TRAIN_IMAGES
    parameters: int = RESNET50_PARAMETERS
    allreduce_dtype: str = 'float16'
    crop_size: int = 224

    def __post_init__(self):
        if self.allreduce_dtype not in DTYPE_BYTES:
            raise ValueError('allreduce_dtype must be one of {}, got {!r}'
                             .format(', '.join(DTYPE_BYTES),
                                     self.allreduce_dtype))
        for name in ('batch_per_gpu', 'epochs', 'train_images', 'parameters',
                     'crop_size'):
            if not getattr(self, name) > 0:
                raise ValueError('{} must be positive, got {}'.format(
                    name, getattr(self, name)))

    @property
    def gradient_bytes(self):
        return self.parameters * DTYPE_BYTES[self.allreduce_dtype]

    @property
    def input_bytes(self):
        """One GPU's float32 minibatch of RGB crops."""
        return self.batch_per_gpu * 3 * self.crop_size ** 2 * 4


_FDR = 64 / 66 * 0.9    # 64b/66b line code, ~90% of it left after headers
_NDR = 0.9              # 400 Gbit/s is the data rate; ~90% after headers

PRESETS = {
    'mn1': Cluster(
        name='mn1',
        description='MN-1 (Akiba et al. 2017): 128 nodes x 8 P100 PCIe, '
                    '2 x FDR InfiniBand per node, thin tree of 8 x 16 nodes',
        gpus_per_node=8,
        images_per_s=195 * 9.3 / 10.6,
        intra_bandwidth=6e9,
        intra_latency=5e-6,
        node_bandwidth=link_bandwidth(2, 56, _FDR),
        inter_latency=10e-6,
        nodes_per_group=16,
        oversubscription=8,
        ring_order='random',
        host_to_device=10e9,
        loader_images_per_s=8 * 200,
        sources={
            'gpus_per_node': 'MN-1: 8 P100 (PCIe) per node (PAPER.md, System)',
            'images_per_s':
                'published TensorFlow tf_cnn_benchmarks figure (2017) for '
                'ResNet-50, fp32, batch 32 on one P100 SXM2 (DGX-1): 195 '
                'images/s, scaled by the PCIe card\'s lower clock (9.3 vs '
                '10.6 TFLOPS peak fp32): 171 images/s',
            'intra_bandwidth':
                'assumption: PCIe gen3 x16 carries 15.75 GB/s raw, ~12 GB/s '
                'peer-to-peer under one switch; an 8-GPU ring over two CPU '
                'sockets crosses the inter-socket link, where copies are '
                'staged through host memory: 6 GB/s ring bandwidth',
            'intra_latency': 'assumption: ~5 us per NCCL ring step over PCIe',
            'node_bandwidth':
                '2 x 56 Gbit/s InfiniBand FDR per node (PAPER.md, System), '
                '64b/66b line code, ~90% protocol efficiency: 12.2 GB/s',
            'inter_latency':
                'assumption: ~10 us per NCCL 2 ring step between nodes (the '
                'wire is ~1 us; a step waits on a host proxy thread)',
            'nodes_per_group': 'thin tree of 8 groups of 16 nodes (PAPER.md)',
            'oversubscription':
                'assumption: one 36-port FDR leaf switch per group, 16 nodes '
                'x 2 links = 32 ports down, 4 up: 8:1',
            'ring_order':
                'assumption: NCCL 2.0 orders its ring by MPI rank and knows '
                'nothing of the leaf switches; the scheduler\'s node order '
                'does not follow them',
            'host_to_device':
                'assumption: PCIe gen3 x16 copy from pageable host memory',
            'loader_images_per_s':
                'assumption: two 8-core Xeons per node, one core per '
                'training process, 8 left for loaders at ~200 images/s each '
                '(decode + resize + crop of a 500x375 JPEG with Pillow: '
                '~260/s measured on one core of this project\'s CI machine)',
        }),
    'h100': Cluster(
        name='h100',
        description='8 x H100 SXM per node on NVLink/NVSwitch, 4 x 400 '
                    'Gbit/s NDR InfiniBand per node, non-blocking fat tree',
        gpus_per_node=8,
        images_per_s=3000,
        intra_bandwidth=360e9,
        intra_latency=3e-6,
        node_bandwidth=link_bandwidth(4, 400, _NDR),
        inter_latency=5e-6,
        nodes_per_group=32,
        oversubscription=1,
        ring_order='grouped',
        host_to_device=25e9,
        loader_images_per_s=104 * 200,
        sources={
            'gpus_per_node': 'HGX/DGX H100 baseboard: 8 GPUs',
            'images_per_s':
                'assumption: ~3,000 images/s per H100 SXM for ResNet-50 '
                'v1.5 in mixed precision, the order of NVIDIA\'s published '
                'large-batch training figures; lower at 32 images per GPU',
            'intra_bandwidth':
                'assumption: NVLink 4 gives 900 GB/s per GPU both ways; NCCL '
                'all-reduce bus bandwidth on 8 H100s is ~360-480 GB/s',
            'intra_latency': 'assumption: ~3 us per ring step over NVLink',
            'node_bandwidth':
                '4 x 400 Gbit/s NDR InfiniBand, ~90% protocol efficiency: '
                '180 GB/s',
            'inter_latency': 'assumption: ~5 us per ring step with GPUDirect '
                             'RDMA',
            'nodes_per_group': 'assumption: 32 nodes per leaf',
            'oversubscription': 'non-blocking fat tree: 1:1',
            'ring_order': 'NCCL orders rings by topology',
            'host_to_device': 'assumption: PCIe gen5 x16 from pageable memory',
            'loader_images_per_s':
                'assumption: two 56-core Xeons, 8 cores for the training '
                'processes, 104 loaders at ~200 images/s',
        }),
}


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


def format_duration(seconds):
    """Seconds as seconds, minutes or hours, whichever reads best."""
    if seconds < 120:
        return '{:.1f} s'.format(seconds)
    if seconds < 2 * 3600:
        return '{:.1f} min'.format(seconds / 60)
    return '{:.1f} h'.format(seconds / 3600)


def format_table(rows, cluster, workload):
    """The Predictions as a text table, times in ms."""
    lines = [
        '{}: {}'.format(cluster.name, cluster.description),
        '{} images per GPU, {:g} epochs of {:,} images, {} all-reduce of '
        '{:.1f} MB'.format(workload.batch_per_gpu, workload.epochs,
                           workload.train_images, workload.allreduce_dtype,
                           workload.gradient_bytes / 1e6),
        '',
        '{:>6} {:>5} {:>9} {:>8} {:>7} {:>7} {:>11} {:>14} {:>8} {:>9}'.format(
            'GPUs', 'nodes', 'iter [ms]', 'worker', 'intra', 'inter',
            'iterations', 'time to train', 'eff/GPU', 'eff/node'),
    ]
    for r in rows:
        t = r.iteration
        lines.append(
            '{:>6} {:>5} {:>9.1f} {:>8.1f} {:>7.1f} {:>7.1f} {:>11.0f} '
            '{:>14} {:>7.1f}% {:>9}'.format(
                r.gpus, r.nodes, 1e3 * t.total,
                1e3 * t.worker,
                1e3 * t.intra, 1e3 * t.inter, r.iterations,
                format_duration(r.seconds), 100 * r.efficiency_gpu,
                '-' if r.efficiency_node is None
                else '{:.1f}%'.format(100 * r.efficiency_node)))
    return '\n'.join(lines)


def format_sources(cluster):
    """Each parameter of ``cluster`` with its source."""
    units = {field: (scale, unit)
             for _, field, _, scale, unit, _ in _OVERRIDES}
    lines = ['{}: {}'.format(cluster.name, cluster.description)]
    for field in dataclasses.fields(cluster):
        if field.name in cluster.sources:
            value = getattr(cluster, field.name)
            if field.name in units:
                scale, unit = units[field.name]
                value = '{:.4g} {}'.format(value / scale, unit).rstrip()
            lines.append('  {} = {}\n      {}'.format(
                field.name, value, cluster.sources[field.name]))
    return '\n'.join(lines)


def plot_scaling(rows, path, title, paper=False):
    """Write a PNG of time to train (log scale) and scaling efficiency
    against the number of GPUs; ``paper`` marks the paper's figures."""
    from PIL import Image, ImageDraw, ImageFont

    width, height, margin = 1100, 460, (80, 50, 25, 60)  # left top right bot
    image = Image.new('RGB', (width, height), 'white')
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    draw.text((width // 2, 8), title, fill='black', font=font, anchor='mt')
    xs = [math.log2(r.gpus) for r in rows]
    x_range = (min(xs), max(max(xs), min(xs) + 1))

    def axes(left, right, y_range, y_ticks, y_label, heading):
        top, bottom = margin[1], height - margin[3]

        def to_pixel(x, y):
            u = (x - x_range[0]) / (x_range[1] - x_range[0])
            v = (y - y_range[0]) / (y_range[1] - y_range[0])
            return left + u * (right - left), bottom - v * (bottom - top)

        draw.rectangle((left, top, right, bottom), outline='black')
        draw.text(((left + right) / 2, top - 8), heading, fill='black',
                  font=font, anchor='mb')
        for r, x in zip(rows, xs):
            px, _ = to_pixel(x, y_range[0])
            draw.line((px, bottom, px, bottom + 4), fill='black')
            draw.text((px, bottom + 6), str(r.gpus), fill='black',
                      font=font, anchor='mt')
        draw.text(((left + right) / 2, bottom + 24), 'GPUs', fill='black',
                  font=font, anchor='mt')
        for y, label in y_ticks:
            _, py = to_pixel(x_range[0], y)
            draw.line((left, py, right, py), fill=(225, 225, 225))
            draw.text((left - 6, py), label, fill='black', font=font,
                      anchor='rm')
        draw.text((left - 6, top - 8), y_label, fill='black', font=font,
                  anchor='rb')
        return to_pixel

    def legend(left, top, slot, colour, label):
        y = top + 16 * slot
        draw.line((left, y, left + 20, y), fill=colour, width=2)
        draw.text((left + 25, y), label, fill='black', font=font,
                  anchor='lm')

    def curve(to_pixel, ys, colour):
        points = [to_pixel(x, y) for x, y in zip(xs, ys) if y is not None]
        draw.line(points, fill=colour, width=2)
        for px, py in points:
            draw.ellipse((px - 3, py - 3, px + 3, py + 3), fill=colour)

    def cross(to_pixel, x, y):
        px, py = to_pixel(x, y)
        draw.line((px - 6, py - 6, px + 6, py + 6), fill=red, width=2)
        draw.line((px - 6, py + 6, px + 6, py - 6), fill=red, width=2)

    seconds = [math.log10(r.seconds) for r in rows]
    ticks = [(math.log10(s), label) for s, label in (
        (10, '10 s'), (60, '1 min'), (600, '10 min'), (3600, '1 h'),
        (36000, '10 h'), (360000, '100 h'), (3600000, '1000 h'))]
    low = min(seconds + ([math.log10(PAPER_SECONDS)] if paper else []))
    high = max(seconds)
    y_range = (math.floor(low * 2) / 2, math.ceil(high * 2) / 2)
    if y_range[1] == y_range[0]:
        y_range = (y_range[0], y_range[0] + 0.5)
    half = width // 2
    blue, orange, red = (31, 119, 180), (255, 127, 14), (214, 39, 40)
    to_pixel = axes(margin[0], half - margin[2], y_range,
                    [t for t in ticks if y_range[0] <= t[0] <= y_range[1]],
                    '', 'time to train (log scale)')
    curve(to_pixel, seconds, blue)
    legend(half - margin[2] - 120, margin[1] + 14, 0, blue, 'model')
    if paper:
        cross(to_pixel, math.log2(PAPER_GPUS), math.log10(PAPER_SECONDS))
        legend(half - margin[2] - 120, margin[1] + 14, 1, red, 'paper')
    to_pixel = axes(half + margin[0], width - margin[2], (0, 105),
                    [(v, '{}%'.format(v)) for v in range(0, 101, 20)],
                    '', 'scaling efficiency')
    curve(to_pixel, [100 * r.efficiency_gpu for r in rows], blue)
    curve(to_pixel, [None if r.efficiency_node is None
                     else 100 * r.efficiency_node for r in rows], orange)
    bottom = height - margin[3] - 60
    legend(half + margin[0] + 15, bottom, 0, blue, 'vs 1 GPU')
    legend(half + margin[0] + 15, bottom, 1, orange, 'vs 1 node')
    if paper:
        for value in (PAPER_EFFICIENCY_GPU, PAPER_EFFICIENCY_NODE):
            cross(to_pixel, math.log2(PAPER_GPUS), 100 * value)
        legend(half + margin[0] + 15, bottom, 2, red, 'paper')
    image.save(path)


# Command-line overrides of the preset: flag, field, type, unit (its size in
# the field's SI unit and its name), help.
_OVERRIDES = (
    ('--gpus-per-node', 'gpus_per_node', int, 1, '', 'GPUs per node'),
    ('--images-per-s', 'images_per_s', float, 1, 'images/s',
     'one GPU\'s training images/s'),
    ('--intra-gbytes-per-s', 'intra_bandwidth', float, 1e9, 'GB/s',
     'ring bandwidth inside a node, GB/s'),
    ('--intra-latency-us', 'intra_latency', float, 1e-6, 'us',
     'ring step latency inside a node, us'),
    ('--node-gbytes-per-s', 'node_bandwidth', float, 1e9, 'GB/s',
     'network bandwidth of one node, all links, GB/s'),
    ('--inter-latency-us', 'inter_latency', float, 1e-6, 'us',
     'ring step latency between nodes, us'),
    ('--nodes-per-group', 'nodes_per_group', int, 1, '',
     'nodes under one leaf switch'),
    ('--oversubscription', 'oversubscription', float, 1, '',
     'leaf down/up bandwidth ratio (1: full fat tree)'),
    ('--h2d-gbytes-per-s', 'host_to_device', float, 1e9, 'GB/s',
     'host-to-GPU copy bandwidth, GB/s'),
    ('--loader-images-per-s', 'loader_images_per_s', float, 1, 'images/s',
     'one node\'s image decoding throughput'),
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog='scaling_model.py',
        description='Predict time per iteration and time to train ResNet-50 '
                    'for N GPUs (see the module docstring for the model).')
    parser.add_argument('--preset', choices=sorted(PRESETS), default='mn1',
                        help='cluster to start from (default: mn1, the '
                             'paper\'s)')
    parser.add_argument('--gpus', type=int, nargs='+',
                        default=[2 ** i for i in range(11)],
                        help='GPU counts to predict for (default 1 ... 1024)')
    parser.add_argument('--batchsize', type=int, default=32,
                        help='images per GPU per iteration')
    parser.add_argument('--epochs', type=float, default=90)
    parser.add_argument('--train-images', type=int,
                        default=IMAGENET_TRAIN_IMAGES)
    parser.add_argument('--crop-size', type=int, default=224)
    parser.add_argument('--allreduce-dtype', choices=sorted(DTYPE_BYTES),
                        default='float16',
                        help='dtype of the gradients on the wire')
    for flag, _, kind, _, _, text in _OVERRIDES:
        parser.add_argument(flag, type=kind, help=text)
    parser.add_argument('--ring-order', choices=RING_ORDERS,
                        help='whether the inter-node ring follows the groups')
    parser.add_argument('--step-time', type=float,
                        help='measured seconds of one worker\'s iteration '
                             'without communication (replaces the modelled '
                             'compute, loading and copy)')
    parser.add_argument('--allreduce-time', type=float,
                        help='measured seconds of one gradient all-reduce '
                             '(e.g. from benchmarks/allreduce.py)')
    parser.add_argument('--allreduce-procs', type=int,
                        help='processes of the measured all-reduce')
    parser.add_argument('--allreduce-bytes', type=float,
                        help='bytes each process all-reduced in the '
                             'measurement (default: the gradient in '
                             '--allreduce-dtype)')
    parser.add_argument('--plot', help='write a PNG figure here')
    parser.add_argument('--json', action='store_true',
                        help='print the predictions as JSON')
    parser.add_argument('--sources', action='store_true',
                        help='print the parameters and their sources')
    args = parser.parse_args(argv)
    if (args.allreduce_time is None) != (args.allreduce_procs is None):
        parser.error('--allreduce-time and --allreduce-procs go together')
    if args.step_time is not None and not args.step_time > 0:
        parser.error('--step-time must be positive, got {}'.format(
            args.step_time))
    if any(g < 1 for g in args.gpus):
        parser.error('--gpus must be positive, got {}'.format(
            ' '.join(map(str, args.gpus))))
    try:
        args.workload = Workload(args.batchsize, args.epochs,
                                 args.train_images,
                                 allreduce_dtype=args.allreduce_dtype,
                                 crop_size=args.crop_size)
        args.cluster = build_cluster(args)
    except ValueError as e:
        parser.error(str(e))
    return args


def build_cluster(args):
    """The preset with the command line's overrides and measurements."""
    changes = {field: getattr(args, flag[2:].replace('-', '_')) * scale
               for flag, field, _, scale, _, _ in _OVERRIDES
               if getattr(args, flag[2:].replace('-', '_')) is not None}
    if args.ring_order is not None:
        changes['ring_order'] = args.ring_order
    if changes:
        changes['sources'] = dict(PRESETS[args.preset].sources, **{
            field: 'command line' for field in changes})
    cluster = dataclasses.replace(PRESETS[args.preset], **changes)
    if args.allreduce_time is not None:
        nbytes = (args.workload.gradient_bytes if args.allreduce_bytes is None
                  else args.allreduce_bytes)
        cluster = calibrate_allreduce(cluster, args.allreduce_time,
                                      args.allreduce_procs, nbytes)
    return cluster


def main(argv=None):
    args = parse_args(argv)
    cluster, workload = args.cluster, args.workload
    if args.sources:
        print(format_sources(cluster))
        return
    rows = predict(args.gpus, cluster, workload, args.step_time)
    if args.json:
        print(json.dumps([dict(r._asdict(), iteration=dict(
            r.iteration._asdict(), total=r.iteration.total)) for r in rows],
            indent=1))
    else:
        print(format_table(rows, cluster, workload))
    paper = (cluster == PRESETS['mn1'] and workload == Workload()
             and args.step_time is None)
    for r in rows:
        if paper and r.gpus == PAPER_GPUS and not args.json:
            print('\npaper at {} GPUs: {} ({} s per iteration); model: {} '
                  '({:.3f} s, {:+.1f}%)'.format(
                      PAPER_GPUS, format_duration(PAPER_SECONDS),
                      PAPER_ITERATION_SECONDS, format_duration(r.seconds),
                      r.iteration.total,
                      100 * (r.seconds / PAPER_SECONDS - 1)))
    if args.plot:
        plot_scaling(rows, args.plot, '{}, {} images per GPU, {} all-reduce'
                     .format(cluster.name, workload.batch_per_gpu,
                             workload.allreduce_dtype), paper=paper)
        print('wrote {}'.format(args.plot), file=sys.stderr)


if __name__ == '__main__':
    main()

"""What the model is given: a cluster's hardware and the workload trained."""
import dataclasses

RESNET50_PARAMETERS = 25557032
IMAGENET_TRAIN_IMAGES = 1281167
DTYPE_BYTES = {'float16': 2, 'float32': 4}
RING_ORDERS = ('random', 'grouped')

# The unit each numeric field of a Cluster is shown and given in: its size
# in the field's SI unit and its name.
UNITS = {
    'gpus_per_node': (1, ''),
    'images_per_s': (1, 'images/s'),
    'intra_bandwidth': (1e9, 'GB/s'),
    'intra_latency': (1e-6, 'us'),
    'node_bandwidth': (1e9, 'GB/s'),
    'inter_latency': (1e-6, 'us'),
    'nodes_per_group': (1, ''),
    'oversubscription': (1, ''),
    'host_to_device': (1e9, 'GB/s'),
    'loader_images_per_s': (1, 'images/s'),
}


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

"""The clusters the model knows, each value with its source, and the
figures Akiba et al. (2017) report for theirs."""
from studies.scaling_model.hardware import Cluster, link_bandwidth

# Akiba, Suzuki & Fukuda (2017): 1024 GPUs, 32 images each, 90 epochs.
PAPER_GPUS = 1024
PAPER_SECONDS = 15 * 60
PAPER_ITERATION_SECONDS = 0.256
PAPER_EFFICIENCY_GPU = 0.70
PAPER_EFFICIENCY_NODE = 0.80

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

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

Run ``python -m studies.scaling_model`` for the paper's MN-1 (Akiba et
al. 2017: 1024 P100s, 15 minutes), ``--preset h100`` for a modern cluster,
``--sources`` for every parameter with its source, ``--plot FILE.png`` for
a figure; ``--step-time`` and ``--allreduce-time`` feed in measured figures.

``hardware`` describes a cluster and a workload, ``presets`` holds the known
clusters with the source of every value, ``model`` the equations above,
``report`` the table, source list and figure, ``__main__`` the command line.
"""

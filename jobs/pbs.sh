#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# PBS Pro job: the paper's 128 nodes x 8 GPUs (32,768 images per update).
# Submit from the repository root:
#
#     qsub jobs/pbs.sh
#     qsub -l select=16:ncpus=40:ngpus=8:mpiprocs=8 -v EPOCH=10 jobs/pbs.sh
#
# Torque spells the resources -l nodes=128:ppn=8:gpus=8. The nodes and the
# processes per node (mpiprocs) come from $PBS_NODEFILE; the launch is
# jobs/multi_node.sh's, output in OUT_ROOT/DATE-JOBID. Settings:
# jobs/common.sh; jobs/README.md.
#
# PBS sends no signal ahead of the walltime, so this script does: STOP_BEFORE
# seconds (300) before it ends, SIGUSR1 to the trainer processes on this
# node; the trainer finishes the update in progress, writes its snapshot and
# exits 4, and this script submits the job again to resume in the same
# output directory (--resume auto). `qsig -s USR1 JOBID` stops it on demand.
#PBS -N resnet50-32k
#PBS -l select=128:ncpus=40:ngpus=8:mpiprocs=8
#PBS -l walltime=01:00:00
#PBS -j oe
set -euo pipefail

# PBS runs a copy of this script; the repository is where qsub was called.
repo=${PBS_O_WORKDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
JOBS_DIR=${JOBS_DIR:-$repo/jobs}
[[ -f $JOBS_DIR/lib.sh ]] || {
    echo "$(basename "$0"): error: JOBS_DIR: no lib.sh in $JOBS_DIR; submit" \
         "from the repository's root, or set JOBS_DIR" >&2
    exit 2
}
# shellcheck source=lib.sh
source "$JOBS_DIR/lib.sh"
[[ -n ${PBS_NODEFILE:-} ]] || die "PBS_NODEFILE is not set; submit with qsub"
[[ -r $PBS_NODEFILE ]] || die "PBS_NODEFILE: cannot read $PBS_NODEFILE"
# One process per line of the node file: mpiprocs of the first node.
GPUS_PER_NODE=${GPUS_PER_NODE:-$(grep -c -x -F "$(head -n 1 "$PBS_NODEFILE")" \
                                 "$PBS_NODEFILE")}
JOB_ID=${PBS_JOBID:-$(new_local_id)}
STOP_BEFORE=${STOP_BEFORE:-300}
require_positive GPUS_PER_NODE
require_count STOP_BEFORE
# A first start makes a new directory; a resubmitted job continues the run
# of the first (RESUME=auto, OUT_DIR).
RESUME=${RESUME:-auto}
if [[ -z ${OUT_DIR:-} ]]; then
    OUT_DIR=${OUT_ROOT:-$repo/result}/$(date +%Y%m%d-%H%M%S)-${JOB_ID//[^A-Za-z0-9._-]/_}
    [[ ! -e $OUT_DIR && ! -L $OUT_DIR ]] ||
        die "OUT_DIR: $OUT_DIR exists already; a new job makes a new directory"
fi
export JOBS_DIR GPUS_PER_NODE RESUME OUT_DIR

# The walltime as [[H]H:]MM:SS from qstat; the stop signal STOP_BEFORE
# seconds before it, to this job's trainer processes on this node (one is
# enough: the workers agree on it).
walltime=$(qstat -f "${PBS_JOBID:-}" 2>/dev/null |
           awk -F' = ' '/Resource_List.walltime/ {print $2}') || true
if [[ ${DRY_RUN:-0} != 1 && $walltime =~ ^([0-9]+):([0-9]+):([0-9]+)$ ]]
then
    left=$((10#${BASH_REMATCH[1]} * 3600 + 10#${BASH_REMATCH[2]} * 60
            + 10#${BASH_REMATCH[3]} - STOP_BEFORE))
    session=$(ps -o sid= -p $$ | tr -d ' ')
    if ((left > 0)); then
        (sleep "$left" && pkill -USR1 -s "$session" -f -- train_imagenet.py) &
    fi
fi

status=0
HOSTFILE=$PBS_NODEFILE JOB_ID=$JOB_ID bash "$JOBS_DIR/multi_node.sh" ||
    status=$?
# Exit 4: stopped with a snapshot; 5: a worker stalled (the trainer's
# watchdog): both resume from the newest snapshot.
if ((status == 4 || status == 5)) && [[ -n ${PBS_JOBID:-} ]]; then
    echo "$(basename "$0"): exit $status; submitting it again to resume" \
         "in $OUT_DIR" >&2
    (cd "$repo" && qsub -W depend=afterany:"$PBS_JOBID" \
         -v RESUME=auto,OUT_DIR="$OUT_DIR" jobs/pbs.sh)
fi
exit "$status"

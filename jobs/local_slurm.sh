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
# `nproc` CPUs and 95% of its memory (MemTotal, what `free` reports).
#
#     jobs/local_slurm.sh [start]   # start, or find it running; wait for idle
#     export SLURM_CONF=/tmp/local-slurm/slurm.conf
#     sbatch --wait --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
#         --gpus-per-node=0 --export=ALL,SMOKE=1 jobs/slurm.sh
#     jobs/local_slurm.sh stop
set -euo pipefail

DIR=${LOCAL_SLURM_DIR:-/tmp/local-slurm}
CTLD_PORT=${LOCAL_SLURM_PORT:-6817}   # slurmd listens on the next port
export SLURM_CONF=$DIR/slurm.conf
NODE=$(uname -n)
NODE=${NODE%%.*}                      # the name slurmd finds for itself

die() {
    echo "$(basename "$0"): error: $*" >&2
    exit 2
}

alive() {  # PIDFILE: the daemon that wrote it is running
    [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

node_state() {
    sinfo --noheader --nodes="$NODE" --format=%T 2>/dev/null || true
}

write_config() {
    local cpus memory
    cpus=$(nproc)
    memory=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.95)}' /proc/meminfo)
    cat > "$SLURM_CONF" <<EOF
ClusterName=local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.socket
StateSaveLocation=$DIR/slurmctld
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
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
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    [[ $(id -u) == 0 ]] || die "run as root (slurmd starts jobs as root)"
    local cmd
    for cmd in munged slurmctld slurmd sinfo; do
        command -v "$cmd" > /dev/null ||
            die "$cmd not found: apt-get install -y slurm-wlm munge"
    done
    if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid" &&
            [[ $(node_state) == idle* ]]; then
        echo "Slurm is running: export SLURM_CONF=$SLURM_CONF"
        return 0
    fi
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
    alive "$DIR/slurmd.pid" || slurmd -f "$SLURM_CONF"
    local state i
    for ((i = 0; i < 60; i++)); do
        state=$(node_state)
        case $state in
            idle*) echo "Slurm is running: export SLURM_CONF=$SLURM_CONF"
                   return 0 ;;
            down*|drain*) scontrol update nodename="$NODE" state=resume \
                              > /dev/null 2>&1 || true ;;
        esac
        sleep 1
    done
    echo "$(basename "$0"): error: node $NODE is '$state', not idle," \
         "after 60 s; logs in $DIR:" >&2
    tail -n 5 "$DIR"/slurm*.log >&2 || true
    exit 1
}

running() {  # PID: alive, not a zombie left for a parent to reap
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ $stat != Z* ]]
}

stop() {
    local name pids=() pid i
    for name in slurmctld slurmd munged; do
        if alive "$DIR/$name.pid"; then
            pids+=("$(cat "$DIR/$name.pid")")
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

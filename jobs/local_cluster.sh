#!/usr/bin/env bash
# Emulated nodes on this machine, to run jobs across "nodes" without a
# cluster (the tests use it too). Needs root (it makes namespaces):
#
#     jobs/local_cluster.sh [-n NODES] [COMMAND [ARGS...]]
#
# makes NODES nodes (default 2) named node1..nodeN, runs COMMAND on node1
# (where a job script starts) and removes the nodes when it ends, exiting
# with COMMAND's status. Without COMMAND it prints how to reach the nodes
# and keeps them until interrupted. Two nodes x 2 CPU processes:
#
#     jobs/local_cluster.sh env SMOKE=1 HOSTS=node1,node2 jobs/multi_node.sh
#
# A node is a network namespace (lo and eth0 with 10.147.0.K/24), a UTS
# namespace (its host name) and a mount namespace (its /etc/hosts names the
# nodes; DIR/tmp is its own, as a node-local disk: the TMPDIR of commands run
# on it, where Open MPI keeps its session files, and Slurm's TmpFS). A switch namespace holds the bridge that the nodes' veth pairs
# plug into: every link and address lives in namespaces made here, and the
# host's network is left alone. All of it, and every process started on the
# nodes, lives in one PID namespace whose first process dies with this
# script, so the kernel removes everything even when the script is killed
# with SIGKILL. Open MPI reaches the nodes through the rsh agent DIR/on
# (PRTE_MCA_plm_ssh_agent, exported to COMMAND), which enters a node's
# namespaces instead of ssh.
#
# Subcommands, for COMMAND or another shell (LOCAL_CLUSTER_DIR=DIR, which
# COMMAND gets; DIR is /tmp/local-cluster-PID):
#
#     jobs/local_cluster.sh on NODE COMMAND...   # as `ssh NODE COMMAND`
#     jobs/local_cluster.sh power-off NODE       # see below
#     jobs/local_cluster.sh power-on NODE        # its link back up
#
# power-off is a node losing power: its link goes down first, so that none
# of its processes says goodbye to its peers, then all of them are killed
# (SIGKILL) at once. The node stays, empty, for power-on.
set -euo pipefail

SCRIPT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "$0")
SUBNET=10.147.0

die() {
    echo "$(basename "$0"): error: $*" >&2
    exit 2
}

# The cluster's PID namespace, and each node's first process in it, are
# named by their PIDs on the host (DIR/*.pid) and in the cluster
# (DIR/*.cpid); `on` is also called from nodes, inside the cluster.
inside() {
    [[ $(readlink /proc/self/ns/pid) == "$(cat "$DIR/pidns")" ]]
}

pid_of() {  # NAME: PID of the holder of node NAME (or the switch)
    [[ -r $DIR/$1.pid ]] || { echo "$(basename "$0"): no node '$1'" >&2
                              exit 255; }
    if inside; then cat "$DIR/$1.cpid"; else cat "$DIR/$1.pid"; fi
}

enter() {  # NODE NSENTER-ARGS...: exec nsenter into the node's namespaces
    local pid options=()
    pid=$(pid_of "$1")
    shift
    inside || options+=(--pid="/proc/$(cat "$DIR/cluster.pid")/ns/pid")
    export TMPDIR=$DIR/tmp
    exec nsenter "${options[@]}" --net="/proc/$pid/ns/net" \
        --uts="/proc/$pid/ns/uts" --mount="/proc/$pid/ns/mnt" "$@"
}

on_switch() {  # COMMAND...: in the switch's network namespace
    nsenter --net="/proc/$(pid_of switch)/ns/net" "$@"
}

node_processes() {  # NODE: PIDs of the node's processes but its first
    local holder
    holder=$(pid_of "$1")
    find -L /proc/[0-9]*/ns/net -maxdepth 0 -samefile "/proc/$holder/ns/net" \
        2>/dev/null | cut -d/ -f3 | grep -vx "$holder" || true
}

case ${1:-} in
    on|power-off|power-on)
        DIR=${LOCAL_CLUSTER_DIR:?"$1: set LOCAL_CLUSTER_DIR (the cluster's)"}
        case $1 in
            on)  # [-x] NODE COMMAND...: one shell command, as ssh runs it
                shift
                while [[ ${1:-} == -* ]]; do shift; done
                (($# >= 2)) || die "usage: $(basename "$0") on NODE COMMAND..."
                node=$1
                shift
                status=0
                # (bash's own "Killed" notice for it goes to /dev/null)
                { (enter "$node" --wd="$PWD" -- /bin/sh -c "$*") 2>&3 3>&-
                } 3>&2 2>/dev/null || status=$?
                # A node that lost power does not close ssh's connection:
                # its caller hears nothing more (until it gives up).
                if [[ -e $DIR/$node.off ]]; then
                    exec sleep infinity
                fi
                exit "$status"
                ;;
            power-off)
                node=${2:?usage: power-off NODE}
                pid_of "$node" > /dev/null
                on_switch ip link set "n${node#node}" down
                touch "$DIR/$node.off"
                mapfile -t pids < <(node_processes "$node")
                while ((${#pids[@]})); do      # again if some had forked
                    kill -KILL "${pids[@]}" 2>/dev/null || true
                    mapfile -t pids < <(node_processes "$node")
                done
                ;;
            power-on)
                node=${2:?usage: power-on NODE}
                pid_of "$node" > /dev/null
                on_switch ip link set "n${node#node}" up
                rm -f "$DIR/$node.off"
                ;;
        esac
        exit $?
        ;;
esac

NODES=2
usage="usage: $(basename "$0") [-n NODES] [COMMAND [ARGS...]]"
while (($#)); do
    case $1 in
        -n) (($# >= 2)) || die "$usage"; NODES=$2; shift 2 ;;
        -h|--help) echo "$usage"; exit 0 ;;
        --) shift; break ;;
        -*) die "unknown option '$1'; $usage" ;;
        *) break ;;
    esac
done
[[ $NODES =~ ^[1-9][0-9]?$ ]] || die "-n must be 1..99, got '$NODES'"
[[ $(id -u) == 0 ]] || die "run as root (it makes namespaces)"
for cmd in unshare nsenter setpriv ip; do
    command -v "$cmd" > /dev/null || die "$cmd not found (util-linux, iproute2)"
done
DIR=${LOCAL_CLUSTER_DIR:-/tmp/local-cluster-$$}
[[ ! -e $DIR ]] || die "$DIR exists (another cluster?); set LOCAL_CLUSTER_DIR"

holder=
cleanup() {
    local status=$?
    trap - EXIT INT TERM HUP
    # The cluster's first process takes every process of the cluster, and
    # with them its namespaces, links and bridge.
    if [[ -n $holder ]]; then
        kill -KILL "$holder" 2>/dev/null || true
        wait "$holder" 2>/dev/null || true
    fi
    rm -rf "$DIR"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

mkdir -p "$DIR/tmp"
{
    echo "127.0.0.1 localhost"
    for ((k = 1; k <= NODES; k++)); do
        echo "$SUBNET.$k node$k"
    done
} > "$DIR/etc-hosts"
for ((k = 1; k <= NODES; k++)); do
    echo "node$k"
done > "$DIR/hosts"

wait_for() {  # FILE: until it is written
    local i
    for ((i = 0; i < 200; i++)); do
        [[ ! -s $1 ]] || return 0
        sleep 0.05
    done
    die "timed out waiting for $1"
}

# The cluster: a PID namespace whose first process dies with this shell
# (setpriv --pdeathsig) and with unshare (--kill-child).
# shellcheck disable=SC2016  # expanded by the holder's shell
setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child --mount-proc \
    -- sh -c 'echo started > "$1"; exec sleep infinity' cluster \
    "$DIR/cluster.started" &
holder=$!
wait_for "$DIR/cluster.started"
# The first process is unshare's child.
for ((i = 0; i < 200; i++)); do
    first=$(cat "/proc/$holder/task/$holder/children" 2>/dev/null) || true
    [[ -z ${first// /} ]] || break
    sleep 0.05
done
echo "${first// /}" > "$DIR/cluster.pid"
readlink "/proc/${first// /}/ns/pid" > "$DIR/pidns"

# hold NAME UNSHARE-ARGS...: a process in the cluster holding new
# namespaces, its PIDs in DIR/NAME.pid (host) and DIR/NAME.cpid (cluster).
hold() {
    local name=$1 i pid
    shift
    nsenter --pid="/proc/$(cat "$DIR/cluster.pid")/ns/pid" -- \
        unshare "$@" &
    disown
    wait_for "$DIR/$name.cpid"
    for pid in /proc/[0-9]*; do      # the host's PID of that process
        pid=${pid#/proc/}
        if [[ $(awk '/^NSpid:/ {print $3}' "/proc/$pid/status" \
                    2>/dev/null) == "$(cat "$DIR/$name.cpid")" ]] &&
           [[ $(readlink "/proc/$pid/ns/pid") == "$(cat "$DIR/pidns")" ]]
        then
            echo "$pid" > "$DIR/$name.pid"
            return 0
        fi
    done
    die "$name: its process vanished"
}

# The switch: a network namespace with the bridge.
# shellcheck disable=SC2016  # expanded by the holder's shell
hold switch --net -- sh -c 'echo "$$" > "$1"; exec sleep infinity' \
    switch "$DIR/switch.cpid"
on_switch sh -c \
    'ip link add br0 type bridge && ip link set br0 up && ip link set lo up'

for ((k = 1; k <= NODES; k++)); do
    # The node's /proc shows the cluster's processes (its PID namespace).
    # DIR/tmp is the node's own temporary directory (DIR/nodeK.tmp).
    mkdir "$DIR/node$k.tmp"
    # shellcheck disable=SC2016  # expanded by the holder's shell
    hold "node$k" --net --uts --mount --propagation private -- \
        sh -c 'mount -t proc proc /proc && hostname "$1" &&
               mount --bind "$2" /etc/hosts && mount --bind "$4" "$5" &&
               echo "$$" > "$3" && exec sleep infinity' node "node$k" \
        "$DIR/etc-hosts" "$DIR/node$k.cpid" "$DIR/node$k.tmp" "$DIR/tmp"
    on_switch ip link add "n$k" type veth peer name eth0 \
        netns "$(cat "$DIR/node$k.pid")"
    on_switch ip link set "n$k" master br0 up
    nsenter --net="/proc/$(cat "$DIR/node$k.pid")/ns/net" sh -c "
        ip link set lo up && ip addr add $SUBNET.$k/24 dev eth0 &&
        ip link set eth0 up"
done

# Open MPI's rsh agent: AGENT [-x] NODE COMMAND.
printf '#!/bin/sh\nLOCAL_CLUSTER_DIR=%q exec %q on "$@"\n' "$DIR" \
    "$SCRIPT" > "$DIR/on"
chmod +x "$DIR/on"

export LOCAL_CLUSTER_DIR=$DIR
export PRTE_MCA_plm_ssh_agent=$DIR/on
hosts=$(paste -s -d, "$DIR/hosts")
if (($# == 0)); then
    cat <<EOF
$NODES emulated nodes: $hosts ($SUBNET.1-$NODES). Ctrl-C removes them.
From another shell:
  export LOCAL_CLUSTER_DIR=$DIR PRTE_MCA_plm_ssh_agent=$DIR/on
  $SCRIPT on node1 hostname
  $SCRIPT on node1 env SMOKE=1 HOSTS=$hosts jobs/multi_node.sh
  $SCRIPT power-off node2
EOF
    wait "$holder"       # until a signal (or the cluster's end)
    exit 1
fi
enter node1 --wd="$PWD" -- "$@" &
wait $!

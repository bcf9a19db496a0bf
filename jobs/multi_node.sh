#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Trains on several nodes named in a hostfile: NODES x GPUS_PER_NODE
# processes under Open MPI's mpiexec, GPUS_PER_NODE on each node.
#
#     HOSTFILE=hosts.txt jobs/multi_node.sh    # one host name per line
#     HOSTS=node01,node02 jobs/multi_node.sh   # writes OUT_DIR/hostfile
#     DRY_RUN=1 HOSTS=node01,node02 jobs/multi_node.sh
#
# Every node must see the repository (and its .venv) at the same path, and
# the data sets. Settings: jobs/common.sh; jobs/README.md explains them.
set -euo pipefail

HOSTFILE=${HOSTFILE:-}                # hosts, one per line ('#' comments)
HOSTS=${HOSTS:-}                      # or a comma-separated list of hosts
JOB_ID=${JOB_ID:-}                    # names the output directory

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
JOB_ID=${JOB_ID:-$(new_local_id)}

if [[ -n $HOSTFILE ]]; then
    [[ -n $HOSTS ]] && die "set HOSTFILE or HOSTS, not both"
    [[ -r $HOSTFILE ]] || die "HOSTFILE: cannot read $HOSTFILE"
    # The first word of each line, comments and blank lines dropped, each
    # host once (a PBS node file repeats it once per process).
    mapfile -t hosts < <(sed -e 's/#.*//' "$HOSTFILE" | awk 'NF {print $1}' |
                         awk '!seen[$0]++')
elif [[ -n $HOSTS ]]; then
    IFS=, read -r -a hosts <<< "$HOSTS"
else
    die "set HOSTFILE (a file of host names) or HOSTS (host1,host2,...)"
fi
NODES=${#hosts[@]}
((NODES > 0)) || die "no hosts in ${HOSTFILE:-HOSTS}"
for host in "${hosts[@]}"; do   # each becomes a line of Open MPI's hostfile
    [[ $host =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] ||
        die "${HOSTFILE:-HOSTS}: '$host' is not a host name"
done
set_accumulate "$((NODES * GPUS_PER_NODE))"
job_setup "$JOB_ID"

# Open MPI's hostfile: each host with a slot per process it runs.
hostfile=$OUT_DIR/hostfile
hostfile_lines=()
for host in "${hosts[@]}"; do
    hostfile_lines+=("$host slots=$GPUS_PER_NODE")
done
if [[ $DRY_RUN == 1 ]]; then
    echo "# hostfile $hostfile:"
    printf '#   %s\n' "${hostfile_lines[@]}"
else
    write_job_file "$OUT_DIR" hostfile "${hostfile_lines[@]}"
fi

rank_command
mpiexec_options
launch "$MPIEXEC" -n "$((NODES * GPUS_PER_NODE))" --hostfile "$hostfile" \
    --map-by "ppr:$GPUS_PER_NODE:node" "${MPIEXEC_OPTIONS[@]}" \
    "${RANK_COMMAND[@]}"

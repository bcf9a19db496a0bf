#!/usr/bin/env bash
# Runs an MPI launch with Open MPI's reports of how the job ended taken out
# of its stderr, so that a failed job's output ends with the trainer's own
# one-line error:
#
#     jobs/mpi_quiet.sh mpiexec -n 2 python train_imagenet.py ...
#     COMMAND 2>&1 | jobs/mpi_quiet.sh      # filter a merged stream
#
# The reports dropped are the boxes (between lines of dashes) that say a
# process called MPI_Abort or that the launcher ended the job because a
# process exited with a non-zero status, and srun's lines that say a task
# exited with a code or was killed and that the step was cancelled (without
# a reason such as a time limit). They repeat what the error line above them
# says, and the exit status carries the code. Every other line and box
# passes through, flushed line by line.
#
# A lost node (Open MPI's "PRTE has lost communication with a remote daemon"
# box) becomes one line naming the node and its ranks, read from the
# trainer's "nodes: ..." line, and exit status 1 (Open MPI's launcher exits
# 0 there):
#
#     error: node node2 lost (ranks 2-3): no answer from it, so Open MPI ended the job
#
# The PMIx server's "PMIX ERROR: PMIX_ERR_UNREACH" lines, which it prints
# when a process it served has gone (after an abort), are dropped too.
# No setting of Open MPI 5 (PRRTE 3) turns these reports off: its launcher
# prints them unconditionally, and error-nonzero-status=false also zeroes the
# exit status.
set -euo pipefail

# Open MPI draws its boxes with lines of 74 dashes (one space before them
# when it aggregates the same report from several processes).
rule=$(printf -- '-%.0s' {1..74})
# shellcheck disable=SC2016  # awk's own $0
FILTER='
function lost_node(box,    host, ranks, i, n, entry) {
    host = box
    sub(/.*Remote daemon:[^\n]* on node /, "", host)
    sub(/[ \n].*/, "", host)
    ranks = ""
    n = split(nodes, entry, ", ")
    for (i = 1; i <= n; i++) {
        if (index(entry[i], host " ranks ") == 1) {
            ranks = " (" substr(entry[i], length(host) + 2) ")"
        }
    }
    print "error: node " host " lost" ranks ": no answer from it, so " \
          "Open MPI ended the job"
    lost = 1
}
function end_box(drop) {
    if (!drop) {
        print box
    }
    box = ""
    lines = 0
    dropped = drop
    fflush()
}
# The launcher of Open MPI at times forwards the closing NUL byte of a C
# string with a report; it lands in front of whichever line comes next.
{ gsub(/\0/, "") }
$0 == rule || $0 == " " rule {
    if (box == "") {
        box = $0
        lines = 1
    } else {
        box = box "\n" $0
        if (box ~ /PRTE has lost communication with a remote daemon/) {
            lost_node(box)
        }
        end_box(box ~ /PRTE has lost communication with a remote daemon/ ||
                box ~ /MPI_ABORT was invoked on rank/ ||
                box ~ /has exited due to process rank[^"]*"abort"/ ||
                box ~ /exited with non-zero status/ ||
                box ~ /process returned[ \n]+a non-zero exit code/)
    }
    next
}
box != "" {
    box = box "\n" $0
    if (++lines > 40) {   # not a box after all
        end_box(0)
    }
    next
}
dropped && !/[[:graph:]]/ { next }   # the blank line after one
/^srun: error: [^ ]+: tasks? [0-9,-]+: (Exited with exit code [0-9]+|Killed)$/ {
    next
}
/^slurmstepd(-[^ ]+)?: error: \*\*\* STEP [0-9.]+ ON [^ ]+ CANCELLED AT [^ ]+ \*\*\*$/ {
    next
}
/^\[[^]]+\] PMIX ERROR: PMIX_ERR_UNREACH / { next }
/^nodes: / { nodes = substr($0, 8) }
{ dropped = 0; print; fflush() }
END {
    if (box != "") print box
    exit lost
}
'

if (($# == 0)); then
    exec awk -v rule="$rule" "$FILTER"
fi
# COMMAND's stdout goes straight to ours; its stderr through the filter.
{ "$@" 2>&1 1>&3 3>&- | awk -v rule="$rule" "$FILTER" >&2; } 3>&1

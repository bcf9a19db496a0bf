#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Trains on one node: GPUS_PER_NODE processes, one per GPU, under mpiexec.
#
#     jobs/single_node.sh                      # 8 GPUs, the settings below
#     SMOKE=1 jobs/single_node.sh              # 2 CPU processes, demo data
#     DRY_RUN=1 jobs/single_node.sh            # print the launch only
#
# Settings: jobs/common.sh (paths, GPUS_PER_NODE, BATCHSIZE, EPOCH,
# COMMUNICATOR, ALLREDUCE_DTYPE, NCCL_*); jobs/README.md explains them.
set -euo pipefail

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

set_accumulate "$GPUS_PER_NODE"
job_setup "$(new_local_id)"
rank_command
mpiexec_options
launch "$MPIEXEC" -n "$GPUS_PER_NODE" "${MPIEXEC_OPTIONS[@]}" \
    "${RANK_COMMAND[@]}"

#!/usr/bin/env bash
# Starts one training process on the GPU of its intra-node rank:
#
#     per_rank.sh MODE COMMAND [ARGS...]
#
# runs COMMAND ARGS... --device DEVICE, DEVICE chosen by MODE from the
# process's rank within its node, as the launcher reports it (Open MPI:
# OMPI_COMM_WORLD_LOCAL_RANK, Slurm's srun: SLURM_LOCALID, MVAPICH2:
# MV2_COMM_WORLD_LOCAL_RANK, MPICH's Hydra: MPI_LOCALRANKID; 0 outside any):
#
#   cuda          --device @cupy:RANK, every GPU of the node stays visible
#                 (NCCL then sees its peers and uses PCIe/NVLink P2P)
#   cuda-visible  CUDA_VISIBLE_DEVICES narrowed to the RANK-th of the GPUs
#                 visible now (all of them if it is unset), --device @cupy:0;
#                 for sites that forbid a process to touch other GPUs
#   cpu           --device -1
#
# Where the launcher already left each process one GPU (Slurm's
# --gpus-per-task=1 or --gpu-bind: CUDA_VISIBLE_DEVICES holds one id), both
# GPU modes keep it and pass --device @cupy:0.
set -euo pipefail

usage="usage: $(basename "$0") cuda|cuda-visible|cpu COMMAND [ARGS...]"
(($# >= 2)) || { echo "$usage" >&2; exit 2; }
mode=$1
shift

local_rank=${OMPI_COMM_WORLD_LOCAL_RANK:-${SLURM_LOCALID:-}}
local_rank=${local_rank:-${MV2_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}}
if ! [[ $local_rank =~ ^[0-9]+$ ]]; then
    echo "$(basename "$0"): error: intra-node rank '$local_rank' is not a" \
         "number" >&2
    exit 2
fi

one_gpu_bound=0
if [[ -n ${CUDA_VISIBLE_DEVICES:-} && $CUDA_VISIBLE_DEVICES != *,* ]]; then
    one_gpu_bound=1
fi

case $mode in
    cuda)
        device=@cupy:$local_rank
        ((one_gpu_bound)) && device=@cupy:0
        ;;
    cuda-visible)
        if ((one_gpu_bound)); then
            :
        elif [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
            IFS=, read -r -a visible <<< "$CUDA_VISIBLE_DEVICES"
            if ((local_rank >= ${#visible[@]})); then
                echo "$(basename "$0"): error: intra-node rank $local_rank" \
                     "but only ${#visible[@]} GPUs visible" \
                     "(CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)" >&2
                exit 2
            fi
            CUDA_VISIBLE_DEVICES=${visible[local_rank]}
        else
            CUDA_VISIBLE_DEVICES=$local_rank
        fi
        export CUDA_VISIBLE_DEVICES
        device=@cupy:0
        ;;
    cpu)
        device=-1
        ;;
    *)
        echo "$(basename "$0"): error: unknown mode '$mode'; $usage" >&2
        exit 2
        ;;
esac

exec "$@" --device "$device"

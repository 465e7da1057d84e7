#!/usr/bin/env bash
# mpirun with the flags tessera needs on one machine, in a container, as root:
#   --allow-run-as-root   Open MPI refuses root otherwise (containers run as root)
#   --oversubscribe       more ranks than cores (tests use 4 ranks on 2 cores)
#   --bind-to none        ranks and their OpenMP / comm threads float freely;
#                         binding each rank to one core starves its helper threads
#   --mca btl self,vader  shared memory only: no network probing (there is none)
#   --mca mpi_yield_when_idle 1
#                         a rank waiting in MPI yields its core instead of
#                         spinning, which is what lets oversubscribed ranks progress
# Vader's default single-copy mechanism (CMA) works here and is faster than
# `btl_vader_single_copy_mechanism none`, so it is left alone.
# On a Slurm cluster use srun instead. Extra flags: TESSERA_MPIRUN_EXTRA.
# Usage: scripts/mpirun.sh -n 4 build/tessera train ...
set -euo pipefail
exec mpirun --allow-run-as-root --oversubscribe --bind-to none \
  --mca btl self,vader --mca mpi_yield_when_idle 1 ${TESSERA_MPIRUN_EXTRA:-} "$@"

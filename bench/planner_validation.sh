#!/usr/bin/env bash
# Closes the planner's loop on this machine: calibrates the `local` system
# under 2 ranks (GEMMs of the default model, memory bandwidth, attention,
# MPI between the ranks), trains 12 different 2-rank layouts of the default
# model for a few steps with metrics files, and runs `tessera plan --validate`
# on them (error per run, mean absolute percentage error of step time and
# memory).
# Usage: bench/planner_validation.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpirun="$root/scripts/mpirun.sh"
"$mpirun" -n 2 "$build/tessera" calibrate --threads 1 --output "$out/local.toml" \
  --model "$root/configs/models/default-small.toml" --micro-batch 4 8 > "$out/calibrate.log" 2>&1 || {
  cat "$out/calibrate.log"; exit 1; }
common=(--config "$root/configs/default.toml" --train-iters 8 --eval-interval 0
        --log-interval 100 --no-progress --peak-tflops 1)
i=0
run() {
  i=$((i + 1))
  "$mpirun" -n 2 "$build/tessera" train "${common[@]}" --metrics-file "$out/run$i.jsonl" "$@" \
    > "$out/run$i.log" 2>&1 || { echo "run $i failed: $*"; cat "$out/run$i.log"; exit 1; }
}
run --zero-stage 0
run --zero-stage 1
run --zero-stage 2
run --zero-stage 3
run --zero-stage 1 --micro-batch-size 4
run --tensor-model-parallel-size 2
run --tensor-model-parallel-size 2 --sequence-parallel
run --pipeline-model-parallel-size 2 --micro-batch-size 4
run --pipeline-model-parallel-size 2 --micro-batch-size 4 --pipeline-schedule gpipe
run --zero-stage 0 --recompute-granularity full
run --zero-stage 1 --recompute-granularity selective
run --tensor-model-parallel-size 2 --micro-batch-size 4 --recompute-granularity full
"$build/tessera" plan --system "$out/local.toml" --validate "$out"/run*.jsonl

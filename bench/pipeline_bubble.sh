#!/usr/bin/env bash
# Pipeline bubble on 2 ranks, small shape (6 layers, hidden 384, 6 heads,
# seq 64, micro-batch 2): pp = 2 with 1F1B and GPipe against one rank, for m
# = 2 .. 32 micro-batches per step. Prints the median step time (steps 3..),
# the measured bubble (time a stage waited on the pipeline / step, from the
# trainer) and the schedule's ideal (p - 1) / m and (p - 1) / (m + p - 1).
# Usage: bench/pipeline_bubble.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(--num-layers 6 --hidden-size 384 --num-attention-heads 6 --seq-length 64
       --micro-batch-size 2 --train-iters 6 --log-interval 100 --no-progress --peak-tflops 1)
for m in 2 4 8 16 32; do
  gb=$((2 * m))
  "$build/tessera" train "${shape[@]}" --global-batch-size $gb --threads 2 \
    --metrics-file "$out/one-$m.jsonl" > /dev/null 2>&1
  for kind in 1f1b gpipe; do
    "$root/scripts/mpirun.sh" -n 2 "$build/tessera" train "${shape[@]}" --global-batch-size $gb \
      --pipeline-model-parallel-size 2 --pipeline-schedule $kind \
      --metrics-file "$out/$kind-$m.jsonl" > /dev/null 2>&1
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(name):
    steps = [json.loads(l) for l in (out / f"{name}.jsonl").read_text().splitlines()][1:][2:]
    ms = statistics.median(s["step_seconds"] for s in steps) * 1e3
    # "idle_fraction" (older metrics files: "bubble_fraction"): idle / total.
    bubble = statistics.median(s.get("idle_fraction", s.get("bubble_fraction", 0)) for s in steps)
    return ms, bubble
print(f"{'m':>3} {'1 rank ms':>10} {'1f1b ms':>8} {'gpipe ms':>9} {'1f1b bubble':>12} {'gpipe bubble':>13}"
      f" {'(p-1)/m':>8} {'(p-1)/(m+p-1)':>14}")
for m in [2, 4, 8, 16, 32]:
    one, _ = load(f"one-{m}")
    f_ms, f_b = load(f"1f1b-{m}")
    g_ms, g_b = load(f"gpipe-{m}")
    print(f"{m:>3} {one:10.1f} {f_ms:8.1f} {g_ms:9.1f} {100*f_b:11.1f}% {100*g_b:12.1f}%"
          f" {100/m:7.1f}% {100/(m+1):13.1f}%")
PY

#!/usr/bin/env bash
# Step time of the parallel layouts on this machine's 2 cores, measured in one
# run: one rank (2 threads) against dp = 2 with ZeRO 0-3 and tp = 2 with and
# without sequence parallelism (1 thread per rank), for the small shape
# (6 layers, hidden 384, 6 heads, seq 64) on the embedded corpus.
# Prints the median step time (steps 3..), tokens/s, the time the step waited
# on communication, the share of collective time hidden behind computation,
# bytes sent per step, and each layout's model-state and activation memory.
# Usage: bench/parallel_step_time.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shape=(--num-layers 6 --hidden-size 384 --num-attention-heads 6 --seq-length 64
       --micro-batch-size 4 --train-iters 10 --lr 3e-4 --min-lr 3e-5 --log-interval 100
       --no-progress --peak-tflops 1)
run() {  # run NAME RANKS ARGS...
  local name=$1 ranks=$2
  shift 2
  if [ "$ranks" -eq 1 ]; then
    "$build/tessera" train "${shape[@]}" --metrics-file "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1
  else
    "$root/scripts/mpirun.sh" -n "$ranks" "$build/tessera" train "${shape[@]}" \
      --metrics-file "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1
  fi
}
# Same global batch (8 sequences) for every layout.
run one-rank 1 --global-batch-size 8 --threads 2
for z in 0 1 2 3; do run dp2-zero$z 2 --global-batch-size 8 --zero-stage $z; done
run tp2 2 --global-batch-size 8 --tensor-model-parallel-size 2
run tp2-sp 2 --global-batch-size 8 --tensor-model-parallel-size 2 --sequence-parallel
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
names = ["one-rank", "dp2-zero0", "dp2-zero1", "dp2-zero2", "dp2-zero3", "tp2", "tp2-sp"]
base = None
print(f"{'layout':<11} {'step ms':>8} {'tok/s':>7} {'vs 1 rank':>9} {'comm wait':>9} {'hidden':>7} "
      f"{'MB sent':>8} {'state MB':>8} {'act MB':>7}")
for n in names:
    lines = [json.loads(l) for l in (out / f"{n}.jsonl").read_text().splitlines()]
    head, steps = lines[0]["run"], lines[1:][2:]
    ms = statistics.median(s["step_seconds"] for s in steps) * 1e3
    tok = statistics.median(s["tokens_per_second"] for s in steps)
    wait = statistics.median(s["seconds_by_op"].get("comm", 0) for s in steps) * 1e3
    inflight = statistics.median(s.get("comm_seconds", 0) for s in steps) * 1e3
    hidden = f"{100 * max(0.0, 1 - wait / inflight):.0f}%" if inflight > 0 else "-"
    sent = statistics.median(sum(s.get("comm_bytes", {}).values()) for s in steps) / 1e6
    m = head["memory_bytes"]
    state = (m["params"] + m["grads"] + m["optimizer"]) / 1e6
    base = base or ms
    print(f"{n:<11} {ms:8.1f} {tok:7.0f} {base / ms:8.2f}x {wait:7.1f}ms {hidden:>7} {sent:8.2f} "
          f"{state:8.1f} {m['activations'] / 1e6:7.1f}")
PY

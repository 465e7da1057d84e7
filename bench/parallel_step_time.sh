#!/usr/bin/env bash
# Step time of the parallel layouts on this machine's 2 cores, measured in one
# run: one rank (2 threads) against dp = 2 with ZeRO 0-3 and tp = 2 with and
# without sequence parallelism (1 thread per rank), for the small shape
# (6 layers, hidden 384, 6 heads, seq 64) on the embedded corpus.
# Prints the median step time (steps 3..), tokens/s, the time the step waited
# on communication, the share of collective time hidden behind computation,
# bytes sent per step, and each layout's model-state and activation memory.
# ROUNDS (default 1) runs every layout that many times, alternating, and
# pools their steps (the medians then span the machine's drift alike).
# TINY=1 (CI, tests/bench): 2 layers of hidden 64, 4 steps, one round, so a
# change that breaks the bench fails the suite in seconds.
# DP_FLAGS: more flags for the dp 2 runs (e.g. --overlap-grad-reduce).
# Usage: [ROUNDS=1] [TINY=1] [DP_FLAGS=...] bench/parallel_step_time.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${ROUNDS:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/parallel_step_time.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${TINY:-0}" = 1 ]; then
  shape=(--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 16
         --micro-batch-size 4 --train-iters 4 --lr 3e-4 --min-lr 3e-5 --log-interval 100
         --no-progress --peak-tflops 1 --eval-interval 0 --save "")
else
  shape=(--num-layers 6 --hidden-size 384 --num-attention-heads 6 --seq-length 64
         --micro-batch-size 4 --train-iters 10 --lr 3e-4 --min-lr 3e-5 --log-interval 100
         --no-progress --peak-tflops 1)
fi
run() {  # run NAME RANKS ARGS...  (a failed run prints its log and fails the bench)
  local name=$1 ranks=$2 launch=()
  shift 2
  [ "$ranks" -eq 1 ] || launch=("$root/scripts/mpirun.sh" -n "$ranks")
  "${launch[@]}" "$build/tessera" train "${shape[@]}" --metrics-file "$out/$name.r$r.jsonl" "$@" \
    > "$out/$name.r$r.log" 2>&1 || { cat "$out/$name.r$r.log"; echo "run failed: $name"; exit 1; }
}
# Same global batch (8 sequences) for every layout.
for r in $(seq 1 "$rounds"); do
  run one-rank 1 --global-batch-size 8 --threads 2
  # shellcheck disable=SC2086  # DP_FLAGS is a list of flags
  for z in 0 1 2 3; do run dp2-zero$z 2 --global-batch-size 8 --zero-stage $z ${DP_FLAGS:-}; done
  run tp2 2 --global-batch-size 8 --tensor-model-parallel-size 2
  run tp2-sp 2 --global-batch-size 8 --tensor-model-parallel-size 2 --sequence-parallel
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, pathlib
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
names = ["one-rank", "dp2-zero0", "dp2-zero1", "dp2-zero2", "dp2-zero3", "tp2", "tp2-sp"]
base = None
print(f"{'layout':<11} {'step ms':>8} {'tok/s':>7} {'vs 1 rank':>9} {'comm wait':>9} {'hidden':>7} "
      f"{'MB sent':>8} {'state MB':>8} {'act MB':>7}")
for n in names:
    steps = []
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in (out / f"{n}.r{r}.jsonl").read_text().splitlines()]
        head = lines[0]["run"]
        steps += [s for s in lines[1:] if "step_seconds" in s][2:]  # warm-up left out
    ms = statistics.median(s["step_seconds"] for s in steps) * 1e3
    tok = statistics.median(s["tokens_per_second"] for s in steps)
    wait = statistics.median(s["seconds_by_op"].get("comm", 0) for s in steps) * 1e3
    inflight = statistics.median(s.get("comm_seconds", 0) for s in steps) * 1e3
    hidden = f"{100 * max(0.0, 1 - wait / inflight):.0f}%" if inflight > 0 else "-"
    sent = statistics.median(sum(s.get("comm_bytes", {}).values()) for s in steps) / 1e6
    # One object per rank (or, in older files, one object): the largest rank's.
    ms_ = head["memory_bytes"]
    m = max(ms_, key=lambda b: b["params"] + b["grads"] + b["optimizer"] + b["activations"]) \
        if isinstance(ms_, list) else ms_
    state = (m["params"] + m["grads"] + m["optimizer"]) / 1e6
    base = base or ms
    print(f"{n:<11} {ms:8.1f} {tok:7.0f} {base / ms:8.2f}x {wait:7.1f}ms {hidden:>7} {sent:8.2f} "
          f"{state:8.1f} {m['activations'] / 1e6:7.1f}")
# ZeRO-2 against ZeRO-1 on the same layout, round by round (the rounds ran
# back to back, so each pair saw the same load), and the median of the pairs.
def tok(n, r):
    lines = [json.loads(l) for l in (out / f"{n}.r{r}.jsonl").read_text().splitlines()]
    return statistics.median(s["tokens_per_second"] for s in [s for s in lines[1:] if "step_seconds" in s][2:])
pairs = [tok("dp2-zero2", r) / tok("dp2-zero1", r) for r in range(1, rounds + 1)]
print("dp2 ZeRO-2 / ZeRO-1 tokens/s by round: " + " ".join(f"{p:.3f}" for p in pairs) +
      f"; median {statistics.median(pairs):.3f}")
PY

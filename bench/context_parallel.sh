#!/usr/bin/env bash
# Context parallelism on 2 ranks (issue 36, docs/context_parallel.md): the
# step time of cp 2 (p2p ring and all_gather) against dp 2 (cp 1, the same
# 2 ranks and global batch), and the share of the ring's traffic hidden
# behind attention. Alternates ROUNDS times (default 3) so the machine's
# drift falls on every run alike; medians over the steps after warm-up.
#
# The hidden share is estimated from the step's exposed communication wait
# (seconds_by_op "comm"): dp 2 waits on the same gradient all-reduce (its
# dp group has the 2 ranks dp x cp has under cp 2) and the loss, so
#   ring wait(x) = wait(x) - wait(dp 2)
# and all_gather exposes its whole exchange (a blocking all-gather of K/V,
# then a reduce-scatter of dK/dV), so
#   hidden = 1 - ring wait(p2p) / ring wait(all_gather)
# (an estimate: the two move about the same bytes at cp 2). Also printed:
# the ring's bytes per step (comm_bytes cp/*) and attention's time.
# TINY=1 (CI, tests/bench): 2 layers of hidden 64, 256 tokens, 3 steps, one
# round: seconds, so a change that breaks the bench fails the suite.
# Usage: bench/context_parallel.sh [BUILD_DIR]   env: ROUNDS=3 SEQ=4096 TINY=0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [ "${TINY:-0}" = 1 ]; then tiny=1; else tiny=0; fi
rounds=${ROUNDS:-$([ $tiny = 1 ] && echo 1 || echo 3)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/context_parallel.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $tiny = 1 ]; then
  shape=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 256 --train-iters 3)
else
  shape=(--num-layers 2 --hidden-size 128 --num-attention-heads 4 --seq-length "${SEQ:-4096}"
         --train-iters 8)
fi
shape+=(--micro-batch-size 1 --global-batch-size 2 --eval-interval 0
        --log-interval 100 --no-progress --save "" --peak-tflops 1 --threads 1)
runs="dp2 p2p all_gather"
for r in $(seq 1 "$rounds"); do
  for run in $runs; do
    case $run in
      dp2) flags=() ;;
      *) flags=(--context-parallel-size 2 --cp-comm-type "$run") ;;
    esac
    name=$run.r$r
    "$root/scripts/mpirun.sh" -n 2 "$build/tessera" train "${shape[@]}" "${flags[@]}" \
      --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 ||
      { cat "$out/$name.log"; echo "run failed: $name"; exit 1; }
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "$rounds" $runs <<'PY'
import json, statistics, sys
out, rounds, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    steps = []
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in open(f"{out}/{name}.r{r}.jsonl")]
        steps += [s for s in lines[1:] if "step_seconds" in s][1:]  # warm-up left out
    med = lambda f: statistics.median(f(s) for s in steps)
    return {"step": 1e3 * med(lambda s: s["step_seconds"]),
            "attn": 1e3 * med(lambda s: s["seconds_by_op"].get("attention", 0)),
            "wait": 1e3 * med(lambda s: s["seconds_by_op"].get("comm", 0)),
            "ring_mb": med(lambda s: sum(v for k, v in s["comm_bytes"].items()
                                         if k in ("cp/send", "cp/all_gather", "cp/reduce_scatter")))
                       / 1e6}
res = {r: load(r) for r in runs}
print(f"{'run':<11} {'step ms':>8} {'attention ms':>12} {'comm wait ms':>12} {'ring MB':>8}")
for r in runs:
    x = res[r]
    print(f"{r:<11} {x['step']:8.1f} {x['attn']:12.1f} {x['wait']:12.1f} {x['ring_mb']:8.2f}")
base = res["dp2"]["wait"]
ring_p2p = max(0.0, res["p2p"]["wait"] - base)
ring_ag = max(0.0, res["all_gather"]["wait"] - base)
hidden = f"{100 * (1 - min(1.0, ring_p2p / ring_ag)):.0f}%" if ring_ag > 0 else "-"
print(f"ring wait: p2p {ring_p2p:.1f} ms, all_gather {ring_ag:.1f} ms; "
      f"share of ring traffic hidden behind attention (p2p): {hidden}")
PY

#!/usr/bin/env bash
# A tiny MoE against the dense model of equal active parameters, on 2 ranks
# (issue 35): tokens/s of the dense model (data-parallel 2), of the MoE
# under data parallelism (every rank runs all E experts) and under expert
# parallelism 2 (each rank runs E/2 experts; tokens exchanged by all-to-all,
# and by the allgather dispatcher), and the expert-parallel exchange's share
# of the step: the all_to_all's seconds in flight (the communicator's
# counters; allgather: the all_gather and reduce_scatter's, which also hold
# the data-parallel gathers of nothing else at ZeRO 0) over the step time,
# medians over the timed steps of rank 0.
# The MoE: E = 4 experts of width F, top-2; the dense model's MLP is 2 F
# wide, so both run the same GEMM FLOPs per token (the router aside).
# TINY=1 (CI, tests/bench): 2 layers of hidden 64, 4 steps: seconds.
# Usage: [TINY=1] bench/moe_step.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/moe_step.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${TINY:-0}" = 1 ]; then
  C=64 F=128 shape=(--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 16
                    --micro-batch-size 4 --global-batch-size 8 --train-iters 4)
else
  C=256 F=512 shape=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 64
                     --micro-batch-size 4 --global-batch-size 8 --train-iters 12)
fi
shape+=(--lr 3e-4 --log-interval 100 --no-progress --eval-interval 0 --save "" --threads 1)
moe=(--num-experts 4 --moe-router-topk 2 --ffn-hidden-size "$F" --moe-aux-loss-coeff 0.01)
run() {  # run NAME ARGS...  (2 ranks; a failed run prints its log and fails the bench)
  local name=$1
  shift
  "$root/scripts/mpirun.sh" -n 2 "$build/tessera" train "${shape[@]}" \
    --metrics-file "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1 ||
    { cat "$out/$name.log"; echo "run failed: $name"; exit 1; }
}
run dense --ffn-hidden-size $((2 * F))
run moe_dp2 "${moe[@]}"
run moe_ep2 "${moe[@]}" --expert-model-parallel-size 2
run moe_ep2_allgather "${moe[@]}" --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def load(name):
    steps = [s for s in map(json.loads, open(f"{out}/{name}.jsonl")) if "step_seconds" in s]
    steps = steps[1:] if len(steps) > 2 else steps  # the first step warms up
    med = lambda f: statistics.median(f(s) for s in steps)
    by_op = lambda s, *ops: sum(s.get("comm_seconds_by_op", {}).get(o, 0.0) for o in ops)
    return {"tok/s": med(lambda s: s["tokens_per_second"]),
            "step ms": 1e3 * med(lambda s: s["step_seconds"]),
            "comm ms": 1e3 * med(lambda s: s["seconds_by_op"].get("comm", 0.0)),
            "a2a ms": 1e3 * med(lambda s: by_op(s, "all_to_all")),
            "a2a share": med(lambda s: by_op(s, "all_to_all") / s["step_seconds"])}
rows = {"dense (2F MLP), dp 2": load("dense"), "MoE 4x F top-2, dp 2": load("moe_dp2"),
        "MoE, ep 2 alltoall": load("moe_ep2"), "MoE, ep 2 allgather": load("moe_ep2_allgather")}
print(f"{'':>24} {'tok/s':>10} {'step ms':>9} {'comm ms':>9} {'a2a ms':>8} {'a2a share':>10}")
for name, r in rows.items():
    print(f"{name:>24} {r['tok/s']:10.0f} {r['step ms']:9.2f} {r['comm ms']:9.2f} "
          f"{r['a2a ms']:8.3f} {100 * r['a2a share']:9.1f}%")
assert rows["MoE, ep 2 alltoall"]["a2a ms"] > 0, "the EP run shows no all_to_all time"
PY

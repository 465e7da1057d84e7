#!/usr/bin/env bash
# Expert parallelism (docs/moe.md): a tiny MoE (4 experts, top-2, aux and
# z-loss, a capacity factor that drops tokens) trained with its experts
# sharded over 2 ranks (each holds 2 experts' parameters, gradients and
# AdamW state) equals one process on the same global batch: EP 2 with the
# alltoall and the allgather dispatcher, EP 2 x DP 2 with ZeRO 0, 1, 2 and
# 3 (expert gradients reduced, their state sharded, over the 2 expert-data-
# parallel ranks) and EP 2 x PP 2 (4 ranks): step 1 within 1e-5 relative, all 10 steps
# within 1e-4, the gradient norms too (1e-5 at step 1, 1e-3 after), and
# the capacity's drops equal one process's (global token order). --bf16
# (EP 2, EP 2 x DP 2 ZeRO-3) and --fp16 (EP 2, allgather) equal one process
# in their precision to 2e-3. A rank's memory report under EP 2 is
# smaller than DP 2's by exactly the 2 experts it no longer holds. Then a
# checkpoint saved at EP 2 resumes at EP 1, and one saved at EP 1 resumes
# at EP 2, each to the uninterrupted run's losses; one saved at EP 2 x DP 2
# ZeRO-3 rewritten at EP 1 ZeRO-0, and back, holds the same parameters and
# moments bit for bit.
# Usage: test_moe_ep.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
scratch_dir
source "$(dirname "${BASH_SOURCE[0]}")/moe_runs.sh"  # model, run, compare
run one 1 --train-iters 10
run ep2 2 --train-iters 10 --expert-model-parallel-size 2
run ep2_allgather 2 --train-iters 10 --expert-model-parallel-size 2 \
  --moe-token-dispatcher-type allgather
run dp2 2 --train-iters 10  # the same micro-batches on each rank as ep2, without EP
run ep2_dp2_zero3 4 --train-iters 10 --expert-model-parallel-size 2 --zero-stage 3
for z in 0 1 2; do
  run ep2_dp2_zero$z 4 --train-iters 10 --expert-model-parallel-size 2 --zero-stage $z
done
run ep2_pp2 4 --train-iters 10 --expert-model-parallel-size 2 --pipeline-model-parallel-size 2
compare "$tmp/one.jsonl" "$tmp/ep2.jsonl" ep2 2
compare "$tmp/one.jsonl" "$tmp/ep2_allgather.jsonl" ep2_allgather 2
for z in 0 1 2 3; do
  compare "$tmp/one.jsonl" "$tmp/ep2_dp2_zero$z.jsonl" ep2_dp2_zero$z 4
done
compare "$tmp/one.jsonl" "$tmp/ep2_pp2.jsonl" ep2_pp2 4
# --bf16 / --fp16: the rows the experts' GEMMs read travel in 16 bits, the
# rest in fp32 (model/expert_parallel.h); each run equals one process in
# the same precision to the 16-bit layout tests' 2e-3 relative loss, every
# step. EP 2 x DP 2 ZeRO-3 takes the experts from gathered 16-bit shards.
run one_bf16 1 --train-iters 10 --bf16
run ep2_bf16 2 --train-iters 10 --bf16 --expert-model-parallel-size 2
run ep2_dp2_zero3_bf16 4 --train-iters 10 --bf16 --expert-model-parallel-size 2 --zero-stage 3
run one_fp16 1 --train-iters 10 --fp16
run ep2_fp16_allgather 2 --train-iters 10 --fp16 --expert-model-parallel-size 2 \
  --moe-token-dispatcher-type allgather
compare_lowp() {  # compare_lowp ONE OTHER NAME PRECISION
  /usr/bin/python3 - "$@" <<'PY' || fail "$3 differs"
import json, sys
one_path, other_path, name, precision = sys.argv[1:5]
def steps(p):
    return {s["step"]: s for s in map(json.loads, open(p)) if "step" in s}
one, other = steps(one_path), steps(other_path)
assert sorted(other) == list(range(1, 11)) == sorted(one), f"{name}: steps {sorted(other)}"
assert {s["precision"] for s in list(one.values()) + list(other.values())} == {precision}, name
assert all(s["moe_tokens_dropped"] > 0 for s in one.values()), "the capacity drops nothing"
loss = [abs(one[k]["loss"] - other[k]["loss"]) / abs(one[k]["loss"]) for k in sorted(one)]
assert max(loss) <= 2e-3, f"{name} losses: {loss}"
print(f"ok: {name}: 10 steps equal one {precision} process's (worst {max(loss):.1e} loss, relative)")
PY
}
compare_lowp "$tmp/one_bf16.jsonl" "$tmp/ep2_bf16.jsonl" ep2_bf16 bf16
compare_lowp "$tmp/one_bf16.jsonl" "$tmp/ep2_dp2_zero3_bf16.jsonl" ep2_dp2_zero3_bf16 bf16
compare_lowp "$tmp/one_fp16.jsonl" "$tmp/ep2_fp16_allgather.jsonl" ep2_fp16_allgather fp16

# The drops: each rank routes its own micro-batches with one process's
# kernels, so rank 0's dropped choices under EP 2 are exactly those of the
# same micro-batches under DP 2 (which equals one process: test_moe_layouts).
/usr/bin/python3 - "$tmp/dp2.jsonl" "$tmp/ep2.jsonl" <<'PY' || fail "drops differ"
import json, sys
def dropped(p):
    return [s["moe_tokens_dropped"] for s in map(json.loads, open(p)) if "step" in s]
a, b = dropped(sys.argv[1]), dropped(sys.argv[2])
assert a == b and all(x > 0 for x in a), (a, b)
print(f"ok: EP 2 drops the choices DP 2 drops, step by step ({a[:3]}...)")
PY
# Memory: under EP 2 each rank holds 2 of the 4 experts of both layers:
# 2 layers x 2 experts x (fc 128 x 32 + 128, proj 32 x 128 + 32) = 33408
# parameters fewer than DP 2 (same dp x cp, so the same unit padding), and
# as many gradients and twice as many moment words (ZeRO-0). Under ZeRO-1
# at EP 2 x DP 2 the experts' moments are sharded over 2 ranks, not 4.
/usr/bin/python3 - "$tmp/dp2.jsonl" "$tmp/ep2.jsonl" "$tmp/ep2_dp2_zero0.jsonl" \
  "$tmp/ep2_dp2_zero1.jsonl" <<'PY' || fail "EP 2's memory report"
import json, sys
def mem(p):
    return json.loads(open(p).readline())["run"]["memory_bytes"]
dp2, ep2, z0, z1 = map(mem, sys.argv[1:5])
experts = 2 * 2 * (128 * 32 + 128 + 32 * 128 + 32)  # parameters no longer held, per rank
assert experts == 33408
for r in range(2):
    assert dp2[r]["params"] - ep2[r]["params"] == 4 * experts, (dp2[r], ep2[r])
    assert dp2[r]["grads"] - ep2[r]["grads"] == 4 * experts, (dp2[r], ep2[r])
    assert dp2[r]["optimizer"] - ep2[r]["optimizer"] == 8 * experts, (dp2[r], ep2[r])
# ZeRO-1 at 4 ranks: the dense moments over 4, the experts' (2 of 4 per
# layer, 33408 words) over the 2 expert-dp ranks: 8 bytes x 33408 / 2.
dense = z0[0]["params"] // 4 - experts  # the dense elements (padding included)
for r in range(4):
    assert z1[r]["optimizer"] == 8 * dense // 4 + 8 * experts // 2, (z1[r], dense)
print(f"ok: EP 2 holds {experts} parameters fewer per rank ({4 * experts} bytes each of "
      f"params and grads, {8 * experts} of moments); ZeRO-1 shards them over expert-dp")
PY
# The planner counts the same bytes (plan/moe_cost.h moe_stage_state, and
# the expert-side views of the arena): plan --validate of the EP runs
# predicts their memory exactly.
for r in ep2 ep2_dp2_zero1 ep2_dp2_zero3; do
  "$bin" plan --validate "$tmp/$r.jsonl" > "$tmp/validate_$r" 2>&1 ||
    { cat "$tmp/validate_$r"; fail "plan --validate of $r"; }
  /usr/bin/python3 - "$tmp/validate_$r" "$r.jsonl" <<'PY' || fail "plan --validate's memory of $r"
import sys
line = next(l for l in open(sys.argv[1]) if l.startswith(sys.argv[2]))
assert " ep 2 " in line, line
errors = [w for w in line.split() if w.endswith("%")]
assert errors[1] in ("+0.0%", "-0.0%", "0.0%"), line
w = line.split()
at = w.index(errors[1])
print(f"ok: plan --validate predicts {sys.argv[2]}'s memory exactly ({w[at - 2]} MB, {w[at]})")
PY
done
# The log says how the experts are placed.
grep -q "ep 2 groups of consecutive dp x cp ranks" "$tmp/ep2.log" ||
  fail "the EP 2 run's layout table does not show the expert groups"

# Checkpoints: every rank holds every expert's parameters and optimizer
# state (docs/moe.md), so a checkpoint does not depend on EP. Save at step
# 5 under EP 2, resume at EP 1; and the reverse.
run save_ep2 2 --train-iters 10 --expert-model-parallel-size 2 --save "$tmp/ck2" --save-interval 5
rm -rf "$tmp/ck2/step_000010"
run load_ep1 1 --train-iters 10 --load "$tmp/ck2"
compare "$tmp/one.jsonl" "$tmp/load_ep1.jsonl" load_ep1 1 6
run save_ep1 1 --train-iters 10 --save "$tmp/ck1" --save-interval 5
rm -rf "$tmp/ck1/step_000010"
run load_ep2 2 --train-iters 10 --expert-model-parallel-size 2 --load "$tmp/ck1"
compare "$tmp/one.jsonl" "$tmp/load_ep2.jsonl" load_ep2 2 6

# Resharding bit for bit: the state saved at step 5 by EP 2 x DP 2 ZeRO-3
# (each expert-dp rank a slice of its 2 experts), loaded at EP 1 ZeRO-0
# and written there (--load at --train-iters with another --save: the
# loaded state, in this layout), then loaded at EP 2 x DP 2 ZeRO-3 and
# written again: the parameters and moments of all three are the same bits.
run save_z3 4 --train-iters 5 --expert-model-parallel-size 2 --zero-stage 3 --save "$tmp/ckz3"
run reshard_ep1 1 --train-iters 5 --load "$tmp/ckz3" --save "$tmp/ckz0"
run reshard_ep2 4 --train-iters 5 --expert-model-parallel-size 2 --zero-stage 3 \
  --load "$tmp/ckz0" --save "$tmp/ckz3b"
/usr/bin/python3 "$src/tests/scripts/ckpt_tensors.py" same "$tmp/ckz3/step_000005" \
  "$tmp/ckz0/step_000005" || fail "EP 2 ZeRO-3 -> EP 1 ZeRO-0 changed the state"
/usr/bin/python3 "$src/tests/scripts/ckpt_tensors.py" same "$tmp/ckz0/step_000005" \
  "$tmp/ckz3b/step_000005" || fail "EP 1 ZeRO-0 -> EP 2 ZeRO-3 changed the state"

finish "EP layout(s) differ from one process" \
  "MoE under EP 2 (alltoall, allgather), EP 2 x DP 2 ZeRO 0-3, EP 2 x PP 2, bf16 / fp16 and across EP in checkpoints equals one process; experts sharded over ep (memory, planner, bit-exact reshard)"

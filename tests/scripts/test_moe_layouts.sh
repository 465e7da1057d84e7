#!/usr/bin/env bash
# Mixture of experts under data and pipeline parallelism (docs/moe.md): the
# experts live in the flat parameter layout, so DP 2 (ZeRO 0 and 3) and PP 2
# train a tiny MoE (4 experts, top-2, aux and z-loss, a capacity factor that
# drops tokens) to the single process's losses and gradient norms: step 1
# within 1e-5 relative, every step to 10 within 1e-4 (norms 1e-3: the
# layouts' tolerance).
# Usage: test_moe_layouts.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
scratch_dir
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16
       --micro-batch-size 2 --global-batch-size 8 --train-iters 10 --lr 5e-3 --no-progress
       --threads 1 --attention-dropout 0 --hidden-dropout 0 --cache-dir "$tmp/cache"
       --num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001
       --moe-expert-capacity-factor 0.75 --eval-interval 0)
run() {  # run NAME RANKS ARGS...
  local name=$1 ranks=$2
  shift 2
  if [ "$ranks" -eq 1 ]; then
    "$bin" train "${model[@]}" --metrics-file "$tmp/$name.jsonl" "$@" >"$tmp/$name.log" 2>&1
  else
    "$mpirun" -n "$ranks" "$bin" train "${model[@]}" --metrics-file "$tmp/$name.jsonl" "$@" \
      >"$tmp/$name.log" 2>&1
  fi || { fail "$name failed:"; tail -5 "$tmp/$name.log"; }
}
run one 1
run dp2 2
run dp2_zero3 2 --zero-stage 3
run pp2 2 --pipeline-model-parallel-size 2
for name in dp2 dp2_zero3 pp2; do
  /usr/bin/python3 - "$tmp/one.jsonl" "$tmp/$name.jsonl" "$name" <<'PY' || fail "$name differs"
import json, sys
def steps(p):
    return [json.loads(l) for l in open(p) if '"step"' in l]
ranks = {s["ranks"] for s in steps(sys.argv[2])}
assert ranks == {2}, f"{sys.argv[3]} ran on {ranks} ranks"
assert all(s["moe_aux_loss"] > 0 for s in steps(sys.argv[2])), "no MoE metrics"
assert all(s["moe_tokens_dropped"] > 0 for s in steps(sys.argv[1])), "the capacity drops nothing"
def rels(key):
    one, other = [s[key] for s in steps(sys.argv[1])], [s[key] for s in steps(sys.argv[2])]
    assert len(one) == len(other) == 10, (len(one), len(other))
    return [abs(a - b) / abs(a) for a, b in zip(one, other)]
loss, norm = rels("loss"), rels("grad_norm")
assert loss[0] <= 1e-5 and max(loss) <= 1e-4, f"losses: {loss}"
# The gradient: its global norm, step 1 as tight as the loss; later steps
# add the updates' drift (the layouts' tolerance, tests/common/tiny_training.h).
assert norm[0] <= 1e-5 and max(norm) <= 1e-3, f"gradient norms: {norm}"
print(f"ok: {sys.argv[3]}: 10 losses and gradient norms equal one process's "
      f"(worst {max(loss):.1e}, {max(norm):.1e} relative)")
PY
done
finish "MoE layout(s) differ from one process" "MoE under DP 2, DP 2 ZeRO-3 and PP 2 equals one process"

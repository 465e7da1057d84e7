# Sourced by the MoE layout tests (test_moe_layouts.sh, test_moe_ep.sh) after
# lib.sh's scratch_dir: one tiny MoE (4 experts, top-2, aux and z-loss, a
# capacity factor that drops tokens), how a layout of it is run, and how a
# run is compared with one process's. Needs $bin, $mpirun and $tmp.
# shellcheck shell=bash
model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16
       --micro-batch-size 2 --global-batch-size 8 --lr 5e-3 --no-progress
       --threads 1 --attention-dropout 0 --hidden-dropout 0 --cache-dir "$tmp/cache"
       --num-experts 4 --moe-router-topk 2 --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001
       --moe-expert-capacity-factor 0.75 --eval-interval 0)
run() {  # run NAME RANKS ARGS...: $tmp/NAME.jsonl (metrics) and NAME.log
  local name=$1 ranks=$2
  shift 2
  if [ "$ranks" -eq 1 ]; then
    "$bin" train "${model[@]}" --metrics-file "$tmp/$name.jsonl" "$@" >"$tmp/$name.log" 2>&1
  else
    "$mpirun" -n "$ranks" "$bin" train "${model[@]}" --metrics-file "$tmp/$name.jsonl" "$@" \
      >"$tmp/$name.log" 2>&1
  fi || { fail "$name failed:"; tail -5 "$tmp/$name.log"; }
}
# compare ONE OTHER NAME RANKS [FIRST]: OTHER (run on RANKS ranks) equals ONE
# at steps FIRST (default 1) to 10: step FIRST's loss and gradient norm
# within 1e-5 relative, every loss within 1e-4 and norm within 1e-3 (later
# steps add the updates' drift: the layouts' tolerance,
# tests/common/tiny_training.h); OTHER has MoE metrics, and from step 1 the
# capacity drops tokens.
compare() {
  /usr/bin/python3 - "$@" <<'PY' || fail "$3 differs"
import json, sys
one_path, other_path, name, ranks = sys.argv[1:5]
first = int(sys.argv[5]) if len(sys.argv) > 5 else 1
def steps(p):
    return {s["step"]: s for s in map(json.loads, open(p)) if "step" in s}
one, other = steps(one_path), steps(other_path)
assert {s["ranks"] for s in other.values()} == {int(ranks)}, f"{name} ran on the wrong ranks"
keys = sorted(other)
assert keys == list(range(first, 11)), f"{name}: steps {keys}"
assert all(s["moe_aux_loss"] > 0 for s in other.values()), f"{name}: no MoE metrics"
def rels(key):
    return [abs(one[k][key] - other[k][key]) / abs(one[k][key]) for k in keys]
loss, norm = rels("loss"), rels("grad_norm")
assert loss[0] <= 1e-5 and max(loss) <= 1e-4, f"{name} losses: {loss}"
assert norm[0] <= 1e-5 and max(norm) <= 1e-3, f"{name} gradient norms: {norm}"
if first == 1:
    assert all(s["moe_tokens_dropped"] > 0 for s in one.values()), "the capacity drops nothing"
print(f"ok: {name}: steps {first}-10 equal one process's "
      f"(worst {max(loss):.1e} loss, {max(norm):.1e} gradient norm, relative)")
PY
}

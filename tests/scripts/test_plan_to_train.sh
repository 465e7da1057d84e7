#!/usr/bin/env bash
# From plan to run (issue 13, part 4): one vocabulary for `plan` and `train`.
# - `plan --config configs/default.toml` plans exactly the run `train --config`
#   runs (one layout: the file's, with train's defaults);
# - `plan --config ... --search --emit-config F` writes the best layout as a
#   train --config file and prints it as train flags; `train --config F
#   --dry-run` and `train <printed flags> --dry-run` describe the same layout
#   with the same predicted step time, exit 0 and allocate nothing;
# - a short real 2-rank train from F runs;
# - a run that does not fit still gets its time, "+N GB over" (plan and dry run);
# - unknown keys in a plan model file or --config: one line naming file and key, exit 2;
# - a boolean flag in a train --config file (sequence-parallel = true) is read;
# - plan --validate warns when a run's ranks x threads differ from the
#   calibration's; calibrate prints progress while it measures.
# Usage: test_plan_to_train.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
scratch_dir
cd "$src" || exit 1

# One line on stderr naming all of the needles, exit 2.
expect_error() {
  local needle=$1
  shift
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 2 ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || ! grep -q -- "$needle" <<<"$err"; then
    fail "$* -> rc $rc, wanted one line with '$needle' and exit 2; got: $err"
  else
    echo "ok: $needle"
  fi
}

# 1. plan --config plans the file's own run: one layout, train's defaults.
out=$("$bin" plan --config configs/default.toml 2>&1) || fail "plan --config configs/default.toml: $out"
grep -q "searched 1 layouts" <<<"$out" || fail "plan --config searched more than the file's layout: $out"
grep -q "^best: tp 1 pp 1 dp 1 mb 8 v 1 zero 0 rc none 1f1b on 1 x" <<<"$out" ||
  fail "plan --config configs/default.toml: not micro-batch 8 of global 16 on 1 rank: $out"
grep -q "vocab 4096\|4.24M parameters" <<<"$out" || fail "the embedded corpus's vocabulary (4096) not used: $out"

# 2. Search, emit, dry-run the emitted file and the printed flags.
out=$("$bin" plan --config configs/default.toml --devices 2 --search --emit-config "$tmp/run.toml" 2>&1) ||
  fail "plan --search --emit-config: $out"
best=$(sed -n 's/^best: \(.*\) on 2 x .*/\1/p' <<<"$out")
[ -n "$best" ] || fail "no best layout in: $out"
[ -f "$tmp/run.toml" ] || fail "--emit-config wrote nothing"
grep -q "^lr = 0.001$" "$tmp/run.toml" || fail "the emitted config lost the file's other settings (lr)"
predicted=$(sed -n 's/^# Predicted: \([0-9.]*\) s per step.*/\1/p' "$tmp/run.toml")
dry=$("$bin" train --config "$tmp/run.toml" --dry-run --dry-run-ranks 2 2>&1)
rc=$?
[ "$rc" -eq 0 ] || fail "train --dry-run of the emitted config: rc $rc: $dry"
grep -qx "layout: $best" <<<"$dry" || fail "dry run's layout differs from the plan's '$best': $dry"
grep -q "^predicted step: $predicted s" <<<"$dry" ||
  fail "dry run's step time differs from the plan's $predicted s: $dry"
grep -q "memory per rank: .* fits" <<<"$dry" || fail "dry run: no memory per rank: $dry"
grep -q "parameters  gradients" <<<"$dry" && fail "dry run allocated the model (its memory table printed)"
# The printed flags: the same run.
# (the indented lines after "run it with").
flags=$(awk '/^run it with 2 ranks/ {on = 1; next} on && /^ / {print; next} {on = 0}' <<<"$out" |
        sed 's/\\$//' | tr -d '\n' | sed 's/^ *tessera train//')
[ -n "$flags" ] || fail "no train flags printed: $out"
# shellcheck disable=SC2086  # the printed words, split as a shell would
dry2=$("$bin" train $flags --dry-run --dry-run-ranks 2 2>&1) || fail "train <printed flags> --dry-run: $dry2"
grep -qx "layout: $best" <<<"$dry2" || fail "printed flags describe another layout than '$best': $dry2"
echo "ok: plan -> --emit-config / printed flags -> train --dry-run: $best, $predicted s"

# 2b. Context parallelism is a layout key: `plan --config` of a cp 2
# all_gather run emits it in the file and the printed flags, and train
# reads both back as the same layout (no stale "train refuses" note).
cat >"$tmp/cp.toml" <<'EOF'
num-layers = 2
hidden-size = 64
num-attention-heads = 4
seq-length = 64
global-batch-size = 4
context-parallel-size = 2
cp-comm-type = "all_gather"
EOF
out=$("$bin" plan --config "$tmp/cp.toml" --emit-config "$tmp/cp_run.toml" 2>&1) ||
  fail "plan --config cp.toml --emit-config: $out"
best=$(sed -n 's/^best: \(.*\) on 2 x .*/\1/p' <<<"$out")
grep -q "^tp 1 cp 2 ag pp 1 dp 1 " <<<"$best" || fail "plan of a cp 2 run: best '$best' in: $out"
grep -q "refuses --context-parallel-size" <<<"$out" && fail "plan still says train refuses cp: $out"
grep -qx "context-parallel-size = 2" "$tmp/cp_run.toml" || fail "no cp in the emitted config"
grep -qx 'cp-comm-type = "all_gather"' "$tmp/cp_run.toml" || fail "no cp-comm-type in the emitted config"
dry=$("$bin" train --config "$tmp/cp_run.toml" --dry-run --dry-run-ranks 2 2>&1) ||
  fail "train --dry-run of the emitted cp config: $dry"
grep -qx "layout: $best" <<<"$dry" || fail "the emitted cp config is another layout than '$best': $dry"
flags=$(awk '/^run it with 2 ranks/ {on = 1; next} on && /^ / {print; next} {on = 0}' <<<"$out" |
        sed 's/\\$//' | tr -d '\n' | sed 's/^ *tessera train//')
grep -q -- "--context-parallel-size 2 .*--cp-comm-type all_gather" <<<"$flags" ||
  fail "the printed train command has no cp: $flags"
echo "ok: a cp 2 run -> --emit-config / printed flags -> train --dry-run: $best"

# 3. A short real run of the emitted config (2 ranks, 2 steps).
if command -v mpirun >/dev/null; then
  run=$(timeout 300 "$src/scripts/mpirun.sh" -n 2 "$bin" train --config "$tmp/run.toml" \
        --train-iters 2 --eval-interval 0 --no-progress 2>&1)
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "^step 2/2 " <<<"$run"; then
    fail "train --config emitted file: rc $rc: $(tail -5 <<<"$run")"
  else
    echo "ok: 2-rank train from the emitted config ran 2 steps"
  fi
else
  echo "skip: no mpirun for the real run"
fi

# 4. Does not fit: time and "+N GB over" (plan exits 2 after the table; dry run 0).
cat >"$tmp/big.toml" <<'EOF'
num-layers = 96
hidden-size = 12288
num-attention-heads = 96
seq-length = 2048
vocab-size = 50257
global-batch-size = 8
EOF
out=$("$bin" plan --config "$tmp/big.toml" --json "$tmp/big.json" 2>"$tmp/err")
rc=$?
[ "$rc" -eq 2 ] || fail "a run that fits nowhere: plan exit $rc, wanted 2"
grep -qE "^ +1 +1 +1 +1 +1 +1 0 none - +1f1b +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ \+[0-9.]+ GB over$" <<<"$out" ||
  fail "no predicted time with '+N GB over' in: $out"
python3 - "$tmp/big.json" <<'EOF' || fail "JSON: the miss has no step time or over_memory_bytes"
import json, sys
m = json.load(open(sys.argv[1]))["closest_misses"][0]
assert m["over_memory_bytes"] > 1e12 and m["step_seconds"] > 0 and not m["fits"], m
EOF
dry=$("$bin" train --config "$tmp/big.toml" --dry-run 2>&1) || fail "dry run of a run that does not fit: $dry"
grep -q "memory per rank: .*: +[0-9.]* GB over" <<<"$dry" || fail "dry run: no '+N GB over': $dry"
grep -q "^predicted step: [0-9.]* s" <<<"$dry" || fail "dry run: no step time when it does not fit: $dry"
echo "ok: does not fit -> predicted time and +N GB over"

# 5. Bad input: one line, exit 2.
printf 'num-layers = 2\nhidden-size = 64\nnum-attention-heads = 4\nseq-length = 32\nnum-layerz = 2\n' \
  >"$tmp/typo.toml"
expect_error "$tmp/typo.toml: unknown key 'num-layerz'" \
  "$bin" plan --model "$tmp/typo.toml" --devices 1 --global-batch-size 1
expect_error "config $tmp/typo.toml: unknown key 'num-layerz'" "$bin" plan --config "$tmp/typo.toml"
expect_error "--config and --model: give one" \
  "$bin" plan --config configs/default.toml --model gpt2-small
expect_error "--search: only with --config" "$bin" plan --search --devices 2 --global-batch-size 2
expect_error "--dry-run-ranks: only with --dry-run" "$bin" train --dry-run-ranks 2
expect_error "--emit-config" "$bin" plan --config configs/default.toml --emit-config /proc/nope/x.toml
expect_error "--precision: bf16, fp16, fp32 or fp8 (got 'mixed16')" \
  "$bin" plan --model gpt2-small --devices 8 --global-batch-size 8 --precision mixed16
# Planner-only settings with --config: refused before the run's calibration
# (which takes minutes on a cold cache); the engine runs neither.
expect_error "--tp-comm-overlap: tessera train does not overlap" \
  "$bin" plan --config configs/default.toml --tp-comm-overlap
expect_error "--precision fp8: tessera train does not train in FP8" \
  "$bin" plan --config configs/default.toml --precision fp8

# 5b. bf16 and fp16 are the planner's precisions too: an fp16 plan runs as --fp16.
out=$("$bin" plan --model gpt2-small --system h100 --devices 8 --global-batch-size 8 \
  --precision fp16 --emit-config "$tmp/fp16.toml" 2>&1) || fail "plan --precision fp16: $out"
grep -q -- "--fp16" <<<"$out" || fail "plan --precision fp16 prints no --fp16: $out"
grep -qx "fp16 = true" "$tmp/fp16.toml" || fail "--emit-config of an fp16 plan: $(cat "$tmp/fp16.toml")"
! grep -q "bf16" "$tmp/fp16.toml" || fail "an fp16 plan's config names bf16: $(cat "$tmp/fp16.toml")"
echo "ok: plan --precision fp16 -> --fp16"

# 6. A boolean flag in a train --config file.
printf 'num-layers = 2\nhidden-size = 64\nnum-attention-heads = 4\nseq-length = 32\n%s\n%s\n' \
  'tensor-model-parallel-size = 2' 'sequence-parallel = true' >"$tmp/sp.toml"
dry=$("$bin" train --config "$tmp/sp.toml" --dry-run --dry-run-ranks 2 2>&1) || fail "sequence-parallel = true: $dry"
grep -q "^layout: tp 2 .* sp 1f1b" <<<"$dry" || fail "sequence-parallel = true not read: $dry"

# 7. plan --validate warns when a run's ranks x threads differ from the
# calibration's (the shipped local.toml: 2 ranks x 1 thread; this run 1 x 1).
"$bin" train --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 \
  --micro-batch-size 2 --global-batch-size 2 --train-iters 4 --threads 1 --eval-interval 0 \
  --no-progress --metrics-file "$tmp/m.jsonl" >/dev/null 2>&1 || fail "the tiny metrics run failed"
out=$("$bin" plan --validate "$tmp/m.jsonl" --system configs/systems/local.toml 2>&1) ||
  fail "plan --validate: $out"
grep -q "^warning: system 'local' was calibrated with 2 rank(s) x 1 thread(s), this run has 1 x 1" \
  <<<"$out" || fail "plan --validate: no ranks x threads warning: $out"
echo "ok: --validate warns on another ranks x threads"

# 8. calibrate says what it is measuring while it measures, and records its
# ranks x threads for the warning above.
out=$("$bin" calibrate --quick --threads 1 --output "$tmp/cal.toml" 2>&1) || fail "calibrate: $out"
for part in "[0-9]* GEMM shapes measured" "attention measured" "memory-bound kernels measured" \
            "training steps measured"; do
  grep -q "^    pass 1/1: $part ([0-9]* s so far)" <<<"$out" || fail "calibrate: no '$part' line: $out"
done
grep -A2 '^\[calibration\]' "$tmp/cal.toml" | tr '\n' ' ' | grep -q "ranks = 1 threads = 1" ||
  fail "calibrate: no [calibration] ranks x threads in its file"
echo "ok: calibrate progress lines and [calibration]"

finish "failed"

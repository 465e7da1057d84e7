#!/usr/bin/env bash
# tessera eval (issue 16, item 2). A tiny run saves a checkpoint and logs its
# validation loss; then:
#   - `eval --checkpoint DIR` (the model from the checkpoint, the embedded
#     corpus's validation part) equals the validation loss `train` logged;
#   - eval under tp 2, pp 2, tp 2 x pp 2 and dp 2 (mpirun, oversubscribed)
#     equals one process's to 1e-6 relative, over train's windows and over
#     every window (a short last micro-batch included);
#   - `train` validating through a 2-stage pipeline logs the same loss;
#   - the checkpoint exported to safetensors evaluates to the same loss,
#     on one process and under tp 2 x pp 2;
#   - a token file with ids beyond the model's vocabulary, and eval with
#     no model, are one line and exit 2.
# Usage: test_eval.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
scratch_dir
cache=(--cache-dir "$tmp/cache")
small=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 8 --train-iters 4 --no-progress --threads 1
       --attention-dropout 0 --hidden-dropout 0 --eval-interval 2 --eval-iters 3 "${cache[@]}")
"$bin" train "${small[@]}" --save "$tmp/ck" --metrics-file "$tmp/m1.jsonl" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; exit 1; }

# The "loss" field of a JSON file, or the last "valid_loss" of a metrics file.
loss_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loss'])" "$1"; }
valid_of() {
  python3 -c "import json,sys; print([json.loads(l)['valid_loss'] for l in open(sys.argv[1]) if 'valid_loss' in l][-1])" "$1"
}
# same A B WHAT: |A - B| <= 1e-6 |B|
same() {
  python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b) <= 1e-6*abs(b) else 1)" "$1" "$2" ||
    { echo "FAIL: $3: $1 vs $2"; exit 1; }
  echo "ok: $3: $1 vs $2"
}
run_eval() {  # OUT RANKS ARGS...: eval on RANKS ranks, its result in OUT
  local out=$1 ranks=$2
  shift 2
  local cmd=("$bin" eval --threads 1 "${cache[@]}" --json "$out" "$@")
  if [ "$ranks" -gt 1 ]; then cmd=("$mpirun" -n "$ranks" "${cmd[@]}"); fi
  "${cmd[@]}" >"$out.log" 2>&1 || { cat "$out.log"; echo "FAIL: ${cmd[*]}"; exit 1; }
}

trained=$(valid_of "$tmp/m1.jsonl")
run_eval "$tmp/e1.json" 1 --checkpoint "$tmp/ck" --eval-iters 3
same "$(loss_of "$tmp/e1.json")" "$trained" "eval --checkpoint vs train's validation loss"
run_eval "$tmp/all1.json" 1 --checkpoint "$tmp/ck" --micro-batch-size 4
grep -q '"windows": 537' "$tmp/all1.json" || { cat "$tmp/all1.json"; echo "FAIL: want 537 windows"; exit 1; }

layouts=("2 --tensor-model-parallel-size 2" "2 --pipeline-model-parallel-size 2"
         "4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" "2")
for l in "${layouts[@]}"; do
  read -r -a a <<<"$l"
  run_eval "$tmp/e.json" "${a[0]}" --checkpoint "$tmp/ck" --eval-iters 3 "${a[@]:1}"
  same "$(loss_of "$tmp/e.json")" "$(loss_of "$tmp/e1.json")" "eval on ${a[0]} ranks ${a[*]:1}"
  # Every window in micro-batches of 4 (537 = 134 x 4 + 1: a short last one).
  run_eval "$tmp/all.json" "${a[0]}" --checkpoint "$tmp/ck" --micro-batch-size 4 "${a[@]:1}"
  same "$(loss_of "$tmp/all.json")" "$(loss_of "$tmp/all1.json")" "every window on ${a[0]} ranks ${a[*]:1}"
done

# train's validation through the pipeline logs what one process logs.
"$mpirun" -n 2 "$bin" train "${small[@]}" --pipeline-model-parallel-size 2 \
  --metrics-file "$tmp/m2.jsonl" >"$tmp/log2" 2>&1 || { cat "$tmp/log2"; exit 1; }
same "$(valid_of "$tmp/m2.jsonl")" "$trained" "train's validation loss under pp 2"

# A safetensors file: the whole model on every rank, each keeping its slice.
"$bin" export --checkpoint "$tmp/ck" --output "$tmp/hf" >/dev/null
run_eval "$tmp/s1.json" 1 --safetensors "$tmp/hf/model.safetensors" --micro-batch-size 2 --eval-iters 3
same "$(loss_of "$tmp/s1.json")" "$(loss_of "$tmp/e1.json")" "eval --safetensors"
run_eval "$tmp/s4.json" 4 --safetensors "$tmp/hf/model.safetensors" --micro-batch-size 2 \
  --eval-iters 3 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
same "$(loss_of "$tmp/s4.json")" "$(loss_of "$tmp/e1.json")" "eval --safetensors under tp 2 x pp 2"

# Bad input: one line, exit 2.
expect_error() {  # PATTERN CMD...: exit 2 and PATTERN in a one-line error
  local pattern=$1
  shift
  set +e
  out=$("$@" 2>&1)
  status=$?
  set -e
  if [ "$status" -ne 2 ] || ! grep -q -- "$pattern" <<<"$out" ||
     [ "$(grep -c 'error' <<<"$out")" -ne 1 ]; then
    echo "FAIL: $* gave exit $status:"
    echo "$out"
    exit 1
  fi
  echo "ok: $(grep error <<<"$out")"
}
# An llm.c GPT-2 shard whose ids run past the model's 4096 tokens.
python3 - "$tmp/big.bin" <<'PY'
import struct, sys
tokens = list(range(4000, 4400))
header = [20240520, 1, len(tokens)] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *header) + struct.pack(f"<{len(tokens)}H", *tokens))
PY
expect_error "has id 4096, but the vocabulary has 4096 tokens" \
  "$bin" eval --checkpoint "$tmp/ck" --data-path "$tmp/big.bin" "${cache[@]}"
# A model of 300 tokens on the embedded corpus (4096).
sed 's/"vocab_size": 4096/"vocab_size": 300/' "$tmp/hf/config.json" >"$tmp/small_vocab.json"
expect_error "vocabulary mismatch: the embedded corpus has 4096 tokens" \
  "$bin" eval --safetensors "$tmp/hf/model.safetensors" --hf-config "$tmp/small_vocab.json" "${cache[@]}"
expect_error "exactly one of --checkpoint DIR and --safetensors FILE" "$bin" eval "${cache[@]}"
expect_error "exactly one of --checkpoint DIR and --safetensors FILE" \
  "$mpirun" -n 2 "$bin" eval "${cache[@]}"
echo "ok: tessera eval"

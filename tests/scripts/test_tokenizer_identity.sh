#!/usr/bin/env bash
# Tokenizer identity enforced everywhere (issue 38, item 4). Two tokenizers
# A and B, text encoded with each; every mix is one line naming both sides,
# exit 2, before a step is taken, on every rank:
#   - a --data-path blend (and a plain list) of A's and B's files;
#   - --valid-data-path in B with training data in A;
#   - eval of a model trained on A with B's tokens, whether the checkpoint
#     has tokenizer files or only the recorded hash of its data;
#   - resuming a model trained on A with B's tokens;
#   - generate --tokenizer B (or bytes) for a model trained on A.
# The matching cases still run (exit 0). Each refusal passed silently before.
# Usage: test_tokenizer_identity.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
mpirun=$src/scripts/mpirun.sh
scratch_dir
cd "$tmp" || exit 1

# Two texts over disjoint words: their tokenizers learn different merges.
words() {  # words SEED WORD...: 400 lines of 12 words drawn by a fixed LCG
  local seed=$1
  shift
  local -a w=("$@")
  local line i
  for ((line = 0; line < 400; line++)); do
    local out=""
    for ((i = 0; i < 12; i++)); do
      seed=$(((seed * 1103515245 + 12345) % 2147483648))
      out+="${w[seed % ${#w[@]}]} "
    done
    echo "$out"
  done
}
words 1 alpha beta gamma delta the cat sat on mat quick brown fox > a.txt
words 2 zeta eta theta iota kappa lambda mu nu xi omicron > b.txt
for t in a b; do
  "$bin" tokenize train --input $t.txt --vocab-size 300 --min-count 1 --output tok$t > /dev/null 2>&1 &&
    "$bin" tokenize encode --vocab tok$t --input $t.txt --output $t.tok > /dev/null 2>&1 ||
    { echo "FAIL: cannot make tokenizer $t"; exit 1; }
done
hash_of() { "$bin" tokenize info "$1" | sed -n 's/.*tokenizer \([0-9a-f]\{16\}\).*/\1/p'; }
ha=$(hash_of a.tok)
hb=$(hash_of b.tok)
[ -n "$ha" ] && [ -n "$hb" ] && [ "$ha" != "$hb" ] || { echo "FAIL: hashes '$ha' '$hb'"; exit 1; }
echo "tokenizer A $ha, B $hb"

small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --train-iters 2 --no-progress --threads 1)
mismatch="tokenizer mismatch: "

# ---- training data -------------------------------------------------------------
expect_refusal "${mismatch}--data-path b.tok has tokenizer $hb but --data-path a.tok has tokenizer $ha" \
  train "${small[@]}" --data-path 0.5 a.tok 0.5 b.tok
expect_refusal "${mismatch}b.tok has tokenizer $hb but a.tok has tokenizer $ha" \
  train "${small[@]}" --data-path a.tok b.tok
expect_refusal "${mismatch}--valid-data-path b.tok has tokenizer $hb but --data-path a.tok has tokenizer $ha" \
  train "${small[@]}" --data-path a.tok --valid-data-path b.tok
expect_refusal "${mismatch}--data-path b.tok has tokenizer $hb but --vocab-file $tmp/toka/vocab.json has tokenizer $ha" \
  train "${small[@]}" --data-path b.tok --vocab-file toka/vocab.json --merge-file toka/merges.txt
expect_exit 0 "saved" train "${small[@]}" --data-path 0.5 a.tok 0.5 a.tok --valid-data-path a.tok \
  --save ck_files --vocab-file toka/vocab.json --merge-file toka/merges.txt
expect_exit 0 "saved" train "${small[@]}" --data-path a.tok --save ck_hash  # no tokenizer files

# On every rank of a job: one line, exit 2, no hang.
out=$(timeout 120 "$mpirun" -n 2 "$bin" train "${small[@]}" --data-path 0.5 a.tok 0.5 b.tok 2>&1)
status=$?
count=$(grep -c "${mismatch}--data-path b.tok" <<<"$out")
if [ "$status" -ne 2 ] || [ "$count" -ne 1 ] || grep -q '^step ' <<<"$out"; then
  fail "-n 2 blend: exit $status (want 2), message $count times (want 1):"
  echo "$out" | sed 's/^/    /'
else
  echo "ok: -n 2: $(grep "$mismatch" <<<"$out")"
fi

# ---- the model's tokenizer: recorded in the checkpoint ---------------------------
for ck in ck_files ck_hash; do
  grep -q "\"tokenizer_hash\": \"$ha\"" $ck/step_000002/metadata.json ||
    fail "$ck: metadata.json does not record tokenizer_hash $ha"
  expect_refusal "${mismatch}--data-path b.tok has tokenizer $hb but the model $ck/step_000002 \\(step 2\\) has tokenizer $ha" \
    eval --checkpoint $ck --data-path b.tok
  expect_exit 0 "eval: loss" eval --checkpoint $ck --data-path a.tok
  expect_refusal "${mismatch}--data-path b.tok has tokenizer $hb but the checkpoint $ck/step_000002 has tokenizer $ha" \
    train "${small[@]}" --train-iters 4 --data-path b.tok --load $ck --save $ck
  expect_refusal "${mismatch}--tokenizer tokb has tokenizer $hb but the model $ck/step_000002 has tokenizer $ha" \
    generate --checkpoint $ck --tokenizer tokb --prompt zeta --max-new-tokens 4
  expect_refusal "${mismatch}--tokenizer bytes has byte-level text but the model $ck/step_000002 has tokenizer $ha" \
    generate --checkpoint $ck --tokenizer bytes --prompt zeta --max-new-tokens 4
  expect_exit 0 "stopped" generate --checkpoint $ck --tokenizer toka --prompt alpha --max-new-tokens 4
done

finish "failure(s)" "all tokenizer identity checks passed"

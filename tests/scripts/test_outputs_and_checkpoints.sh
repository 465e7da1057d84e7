#!/usr/bin/env bash
# Issue 15, defects 3, 8 and 9, through the CLI:
# - every output (--save, --metrics-file, --trace, plan --json/--svg, bench
#   peak --output) that cannot be written is refused before the work, and a
#   write that fails later (/dev/full: a full disk) is an error, exit 2;
# - a checkpoint carries its tokenizer: generate and export work from
#   another directory after the tokenizer files are gone;
# - --load at or past --train-iters says so (exit 0);
# - a --save directory holds one run: a second run is refused (the first
#   run's checkpoints stay as they were) unless it resumes from it or passes
#   --overwrite-save; import never repoints a training run's `latest`.
# Usage: test_outputs_and_checkpoints.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
scratch_dir
cd "$tmp" || exit 1
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --no-progress --peak-tflops 1)


# expect_exit CODE PATTERN ARGS...: tessera ARGS exits CODE and prints PATTERN.
expect_timeout=60  # expect_exit's limit: these runs are tiny

# A refused output must be refused before training: no step ran.
expect_refused_before_training() {  # PATTERN ARGS...
  expect_exit 2 "$@"
  if grep -q '^step ' <<<"$last_out"; then fail "tessera ${*:2}: trained before refusing"; fi
}

# ---- defect 3: outputs checked before the work ------------------------------
long=("${small[@]}" --train-iters 200)
expect_refused_before_training '--save /proc/nope/ckpt: cannot create' train "${long[@]}" --save /proc/nope/ckpt
printf 'x' > "$tmp/a_file"
expect_refused_before_training "--save $tmp/a_file: " train "${long[@]}" --save "$tmp/a_file"
expect_refused_before_training '--metrics-file /proc/nope/m.jsonl' \
  train "${long[@]}" --metrics-file /proc/nope/m.jsonl
expect_refused_before_training "--metrics-file $tmp: is a directory" train "${long[@]}" --metrics-file "$tmp"
expect_refused_before_training '--trace /proc/nope/t.json' train "${long[@]}" --trace /proc/nope/t.json
mkfifo "$tmp/fifo"
expect_refused_before_training "--metrics-file $tmp/fifo: is a named pipe with no reader" \
  train "${long[@]}" --metrics-file "$tmp/fifo"
# A full disk while training: an error, not a truncated file and exit 0.
expect_exit 2 '--metrics-file /dev/full: write failed' train "${small[@]}" --metrics-file /dev/full
# plan and bench peak: checked before the search or the measurement.
plan=(plan --model gpt2-small --system frontier --devices 8 --global-batch-size 8)
expect_exit 2 '--json /proc/nope/p.json' "${plan[@]}" --json /proc/nope/p.json
if grep -q 'searched' <<<"$last_out"; then fail "plan searched before refusing --json"; fi
expect_exit 2 '--json /dev/full: write failed' "${plan[@]}" --json /dev/full
expect_exit 2 "--svg $tmp/a_file" "${plan[@]}" --svg "$tmp/a_file"
expect_exit 2 '--output /proc/nope/peak.json' bench peak --output /proc/nope/peak.json
if [ "$(wc -l <<<"$last_out")" -ne 1 ]; then fail "bench peak measured before refusing --output"; fi
# And a good path still gets its file.
expect_exit 0 'best' "${plan[@]}" --json "$tmp/out/plan.json"
[ -s "$tmp/out/plan.json" ] || fail "plan --json did not write $tmp/out/plan.json"

# ---- defect 8: the tokenizer travels in the checkpoint ----------------------
# A private copy of the embedded corpus's tokenizer and data, named by a
# relative path as users do; then removed, and the checkpoint read from /.
expect_exit 0 'saved' train "${small[@]}" --save warmup
corpus=$(sed -n 's/.*"tokenizer": "\(.*\)",/\1/p' warmup/step_000002/metadata.json | head -1)
[ -f "$corpus/vocab.json" ] || fail "no tokenizer recorded in warmup/step_000002/metadata.json"
mkdir tok && cp "$corpus/vocab.json" "$corpus/merges.txt" "$corpus"/*.tok tok/
expect_exit 0 'saved' train "${small[@]}" --save run1 --data-path tok/*.tok \
  --vocab-file tok/vocab.json --merge-file tok/merges.txt
cmp -s tok/merges.txt run1/step_000002/tokenizer/merges.txt || fail "tokenizer not copied into run1"
grep -q "\"tokenizer\": \"$tmp/tok\"" run1/step_000002/metadata.json ||
  fail "the recorded tokenizer source is not absolute: $(grep '"tokenizer"' run1/step_000002/metadata.json)"
mv tok tok_moved
(cd / && timeout 60 "$bin" generate --checkpoint "$tmp/run1" --prompt "The" --max-new-tokens 4 \
   --seed 1 > "$tmp/gen.log" 2>&1) || { fail "generate without the original tokenizer:"; cat gen.log; }
expect_exit 0 'exported' export --checkpoint "$tmp/run1" --output "$tmp/hf"
cmp -s tok_moved/vocab.json hf/vocab.json || fail "export did not carry the tokenizer"
mv tok_moved tok
# (A resume with other BPE files is refused: tests/ckpt/test_checkpoint_dirs;
# through the CLI a tessera token file's recorded tokenizer hash refuses it
# even earlier.)
# --load at or past --train-iters: one line, and nothing else happens.
expect_exit 0 'nothing to train: the checkpoint is at step 2, --train-iters is 2' \
  train "${small[@]}" --save run1 --load run1 --data-path tok/*.tok \
  --vocab-file tok/vocab.json --merge-file tok/merges.txt

# ---- defect 9: a --save directory holds one run -----------------------------
expect_exit 0 'saved' train "${small[@]}" --train-iters 4 --save-interval 2 --save shared
before=$(cat shared/latest; cksum shared/step_000004/params-*.bin)
expect_refused_before_training "--save shared already holds another run's checkpoints \\(2 steps, the newest step_000004\\).*--overwrite-save" \
  train "${long[@]}" --seed 7 --save shared --save-keep 1
[ "$before" = "$(cat shared/latest; cksum shared/step_000004/params-*.bin)" ] ||
  fail "the refused run changed shared/"
# Resuming from the same directory is this run: allowed.
expect_exit 0 'resumed from shared/step_000004' train "${small[@]}" --train-iters 6 --save shared --load shared
# A rewind to an older step would mix histories: refused unless told.
expect_refused_before_training 'holds checkpoints newer than --load shared/step_000002' \
  train "${small[@]}" --train-iters 6 --save shared --load shared/step_000002
expect_exit 0 'deleted 2 checkpoint' train "${small[@]}" --train-iters 3 --save shared \
  --load shared/step_000002 --overwrite-save
[ "$(ls -d shared/step_* | xargs -n1 basename | tr '\n' ' ')" = "step_000002 step_000003 " ] ||
  fail "after the rewind shared/ holds $(ls shared)"
[ "$(cat shared/latest)" = step_000003 ] || fail "latest is $(cat shared/latest) after the rewind"
# --overwrite-save without --load: the other run's steps are gone, this run's kept.
expect_exit 0 'deleted 2 checkpoint' train "${small[@]}" --seed 7 --save shared --overwrite-save
[ "$(ls -d shared/step_* | xargs -n1 basename | tr '\n' ' ')" = "step_000002 " ] ||
  fail "after --overwrite-save shared/ holds $(ls shared)"
grep -q '"seed": "7"' shared/step_000002/metadata.json || fail "step_000002 is not the new run's"
# Two ranks: refused on both, the message once, no rank left waiting.
out=$(timeout 120 "$src/scripts/mpirun.sh" -n 2 "$bin" train "${long[@]}" --global-batch-size 4 \
  --save shared 2>&1)
status=$?
count=$(grep -c "already holds another run's checkpoints" <<<"$out")
if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || [ "$count" -ne 1 ] || grep -q '^step ' <<<"$out"; then
  fail "2 ranks, --save shared: exit $status, message printed $count times:"
  echo "$out" | tail -5 | sed 's/^/    /'
else
  echo "ok: 2 ranks: $(grep "already holds" <<<"$out")"
fi
# An import into a training run's directory is refused; latest stays.
expect_exit 2 '--output shared already holds checkpoints \(newest step_000002\)' \
  import --input hf/model.safetensors --output shared
[ "$(cat shared/latest)" = step_000002 ] || fail "import repointed shared/latest to $(cat shared/latest)"
expect_exit 0 'imported' import --input hf/model.safetensors --output fresh
[ -f fresh/step_000000/tokenizer/vocab.json ] || fail "import did not copy the tokenizer"

finish "case(s) failed" "outputs are checked before the work, checkpoints carry their tokenizer and hold one run"

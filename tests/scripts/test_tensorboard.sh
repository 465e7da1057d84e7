#!/usr/bin/env bash
# --tensorboard-dir (issue 16): a tiny run writes TensorBoard event files,
# and an independent reader (tensorboard_reader.py: the TFRecord framing and
# CRCs by hand, the Event protobuf through Debian's python3-protobuf) finds
# every step's loss, lr and grad norm equal to the --metrics-file's, the
# validation losses at the evaluated steps, and the memory once. An
# unwritable directory is one line and exit 2 before training.
# Usage: test_tensorboard.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
scratch_dir
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --no-progress --threads 1
       --eval-interval 3 --eval-iters 1 --cache-dir "$tmp/cache")
"$bin" train "${small[@]}" --tensorboard-dir "$tmp/tb" --metrics-file "$tmp/m.jsonl" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; exit 1; }
files=("$tmp"/tb/events.out.tfevents.*)
[ "${#files[@]}" -eq 1 ] || { echo "FAIL: want one event file, got ${files[*]}"; exit 1; }
/usr/bin/python3 "$src/tests/scripts/tensorboard_reader.py" "${files[0]}" "$tmp/m.jsonl"

touch "$tmp/not_a_dir"
set +e
out=$("$bin" train "${small[@]}" --tensorboard-dir "$tmp/not_a_dir/tb" 2>&1)
status=$?
set -e
if [ "$status" -ne 2 ] || ! grep -q -- "--tensorboard-dir" <<<"$out"; then
  echo "FAIL: an unwritable --tensorboard-dir gave exit $status:"
  echo "$out"
  exit 1
fi
echo "ok: $(grep -- --tensorboard-dir <<<"$out" | head -1)"

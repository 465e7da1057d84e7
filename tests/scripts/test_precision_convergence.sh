#!/usr/bin/env bash
# The main job's model (configs/default.toml: 300 steps on the embedded
# corpus) trained in --bf16 and --fp16 (dynamic loss scaling from the
# default 2^32, so the first steps overflow and are skipped) against fp32's
# recorded validation loss (below): the
# validation loss at step 300 of each 16-bit run must be within 2 % of the
# fp32 run's (issue 12), and the fp16 run must have handled at least one
# overflow (a skipped step) and still ended within that 2 %.
# Usage: test_precision_convergence.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
scratch_dir
# The embedded corpus is tokenized once into a cache shared by the three runs.
common=(--config "$src/configs/default.toml" --no-progress --cache-dir "$tmp/cache")

final() {  # final METRICS_FILE KEY: KEY of the last JSON line that has it
  grep "\"$2\"" "$1" | tail -1 | sed -E "s/.*\"$2\":([^,}]*).*/\1/"
}

# fp32 is the reference path (its losses change only when an issue says so,
# and tests/train's fp32 reference test holds it to the bit), so its
# validation loss at step 300 of configs/default.toml is recorded here
# rather than trained again in every CI run (a third of this test, ~5 of
# the suite's ~19 minutes on the AVX2 host): `tessera train --config
# configs/default.toml` on 2026-12-01, AMD EPYC (AVX2), metrics valid_loss
# (the same 5.4305 on the Intel AVX-512 host). Another config, or
# TESSERA_TRAIN_FP32=1, trains fp32 here as before.
recorded_sha=77618ada8ba2a40b99b7b5458d1bbcadfe718b06c48862697b3a7847a6f5202d
recorded_fp32=5.430499076843262
precisions=(bf16 fp16)
if [ "$(sha256sum < "$src/configs/default.toml" | cut -d' ' -f1)" != "$recorded_sha" ] ||
   [ "${TESSERA_TRAIN_FP32:-0}" = 1 ]; then
  precisions=(fp32 bf16 fp16)
fi

for precision in "${precisions[@]}"; do
  flag=()
  [ "$precision" = fp32 ] || flag=(--"$precision")
  "$bin" train "${common[@]}" "${flag[@]}" --metrics-file "$tmp/$precision.jsonl" \
    >"$tmp/$precision.log" 2>&1 || { cat "$tmp/$precision.log"; exit 1; }
  echo "$precision: valid loss $(final "$tmp/$precision.jsonl" valid_loss)," \
    "step $(final "$tmp/$precision.jsonl" step)"
done

if [ -f "$tmp/fp32.jsonl" ]; then
  ref=$(final "$tmp/fp32.jsonl" valid_loss)
else
  ref=$recorded_fp32
  echo "fp32: valid loss $ref (recorded for this configs/default.toml)"
fi
status=0
for precision in bf16 fp16; do
  loss=$(final "$tmp/$precision.jsonl" valid_loss)
  if awk -v a="$loss" -v b="$ref" 'BEGIN { d = (a - b) / b; exit !(d < 0.02 && d > -0.02) }'; then
    echo "ok: $precision valid loss $loss within 2 % of fp32's $ref"
  else
    echo "FAIL: $precision valid loss $loss is not within 2 % of fp32's $ref"
    status=1
  fi
done
skipped=$(final "$tmp/fp16.jsonl" skipped_steps)
if [ "${skipped:-0}" -ge 1 ]; then
  echo "ok: the fp16 run skipped $skipped overflowing steps and went on"
else
  echo "FAIL: the fp16 run handled no overflow (skipped_steps ${skipped:-missing})"
  status=1
fi
exit $status

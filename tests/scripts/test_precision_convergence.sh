#!/usr/bin/env bash
# The main job's model (configs/default.toml: 300 steps on the embedded
# corpus) trained in fp32, --bf16 and --fp16 (dynamic loss scaling from
# the default 2^32, so the first steps overflow and are skipped): the
# validation loss at step 300 of each 16-bit run must be within 2 % of the
# fp32 run's (issue 12), and the fp16 run must have handled at least one
# overflow (a skipped step) and still ended within that 2 %.
# Usage: test_precision_convergence.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The embedded corpus is tokenized once into a cache shared by the three runs.
common=(--config "$src/configs/default.toml" --no-progress --cache-dir "$tmp/cache")

final() {  # final METRICS_FILE KEY: KEY of the last JSON line that has it
  grep "\"$2\"" "$1" | tail -1 | sed -E "s/.*\"$2\":([^,}]*).*/\1/"
}

for precision in fp32 bf16 fp16; do
  flag=()
  [ "$precision" = fp32 ] || flag=(--"$precision")
  "$bin" train "${common[@]}" "${flag[@]}" --metrics-file "$tmp/$precision.jsonl" \
    >"$tmp/$precision.log" 2>&1 || { cat "$tmp/$precision.log"; exit 1; }
  echo "$precision: valid loss $(final "$tmp/$precision.jsonl" valid_loss)," \
    "step $(final "$tmp/$precision.jsonl" step)"
done

ref=$(final "$tmp/fp32.jsonl" valid_loss)
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

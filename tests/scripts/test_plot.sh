#!/usr/bin/env bash
# `tessera plot` (issue 16): two tiny runs' metrics files give loss (against
# steps and tokens), throughput and MFU charts with one training and one
# validation curve per run, axes with units and a legend naming the runs;
# a file that is not a metrics file is one line naming the file and line,
# exit 2.
# Usage: test_plot.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
scratch_dir
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --train-iters 6 --no-progress --threads 1
       --eval-interval 3 --eval-iters 1 --cache-dir "$tmp/cache" --peak-tflops 1)
"$bin" train "${small[@]}" --metrics-file "$tmp/run_a.jsonl" >/dev/null
"$bin" train "${small[@]}" --lr 1e-3 --metrics-file "$tmp/run_b.jsonl" >/dev/null
"$bin" plot "$tmp/run_a.jsonl" "$tmp/run_b.jsonl" --output "$tmp/plots"
check() {  # check FILE WHAT COUNT PATTERN: PATTERN occurs COUNT times in FILE
  local n
  n=$(grep -o -- "$4" "$1" | wc -l)
  if [ "$n" -ne "$3" ]; then
    fail "$(basename "$1"): $2: found $n, want $3"
  fi
}
for chart in loss loss_tokens; do
  f=$tmp/plots/$chart.svg
  check "$f" "curves (2 runs x training + validation)" 4 'class="series"'
  check "$f" "dashed validation curves" 2 'class="series" points="[^"]*" fill="none" stroke="[^"]*" stroke-width="2" stroke-dasharray'
  check "$f" "legend entries" 1 '>run_a validation<'
  check "$f" "legend entries" 1 '>run_b training<'
  check "$f" "y axis label" 1 'loss (nats per token)'
done
check "$tmp/plots/loss_tokens.svg" "x axis label" 1 '>tokens trained<'
check "$tmp/plots/throughput.svg" "curves" 2 'class="series"'
check "$tmp/plots/throughput.svg" "y axis label" 1 'tokens per second'
check "$tmp/plots/mfu.svg" "curves" 2 'class="series"'

printf 'not json\n' >"$tmp/garbage.jsonl"
expect_refusal "garbage.jsonl:1: not JSON" plot "$tmp/garbage.jsonl" --output "$tmp/bad"
head -1 "$tmp/run_a.jsonl" >"$tmp/no_steps.jsonl"
expect_refusal "no_steps.jsonl: no steps" plot "$tmp/no_steps.jsonl" --output "$tmp/bad"
expect_refusal "cannot open metrics file" plot "$tmp/missing.jsonl" --output "$tmp/bad"
finish "failure(s)" "plot: all checks passed"

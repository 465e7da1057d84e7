#!/usr/bin/env bash
# Bad layouts in a multi-rank job: one clear message (printed once, by rank
# 0, when every rank fails alike), a nonzero exit of the whole job, and no
# rank left hanging (each case must end well inside its time limit).
# Usage: test_mpi_errors.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun="$src/scripts/mpirun.sh"
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --train-iters 2 --no-progress --peak-tflops 1)

expect_job_error() {  # expect_job_error RANKS PATTERN COMMAND ARGS...
  local ranks=$1 pattern=$2
  shift 2
  local out status count
  out=$(timeout 60 "$mpirun" -n "$ranks" "$bin" "$@" 2>&1)
  status=$?
  job_status=$status
  count=$(grep -Ec -- "$pattern" <<<"$out")
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    fail "-n $ranks $*: exited $status (want a clean nonzero exit, no hang)"
  elif [ "$count" -ne 1 ]; then
    fail "-n $ranks $*: message /$pattern/ printed $count times (want once):"
    echo "$out" | sed 's/^/    /'
  else
    echo "ok: -n $ranks: $(grep -E -- "$pattern" <<<"$out")"
  fi
}

expect_job_error 2 '--global-batch-size \(6\) must be divisible by --micro-batch-size \(2\) x data-parallel size \(2\)' \
  train "${small[@]}" --global-batch-size 6
expect_job_error 3 'world size 3 is not divisible by --tensor-model-parallel-size \(2\)' \
  train "${small[@]}" --tensor-model-parallel-size 2
expect_job_error 2 '--zero-stage must be 0, 1, 2 or 3 \(got 5\)' train "${small[@]}" --zero-stage 5
expect_job_error 2 '--num-attention-heads \(3\) must be divisible by --tensor-model-parallel-size \(2\)' \
  train "${small[@]}" --tensor-model-parallel-size 2 --num-attention-heads 3 --hidden-size 48
expect_job_error 2 '--seq-length \(15\) must be divisible by --tensor-model-parallel-size \(2\) with --sequence-parallel' \
  train "${small[@]}" --tensor-model-parallel-size 2 --sequence-parallel --seq-length 15
expect_job_error 2 '--num-layers must be in \[1, 65536\] \(got 0\)' train "${small[@]}" --num-layers 0
expect_job_error 2 'cannot open token data /nonexistent.tok' train "${small[@]}" --data-path /nonexistent.tok
# Uneven pipeline stages (issue 13): splits that cannot be, refused on every
# rank with exit code 2 before any allocation.
expect_job_error2() {  # as expect_job_error, and the job's exit code must be 2
  local before=$failures
  expect_job_error "$@"
  if [ "$failures" -eq "$before" ] && [ "$job_status" -ne 2 ]; then
    fail "-n $1 ${*:3}: exited $job_status (want 2)"
  fi
}
first=--decoder-first-pipeline-num-layers
last=--decoder-last-pipeline-num-layers
expect_job_error2 3 "--num-layers \\(4\\) less $first leaves 3 layers, not divisible by the 2 other pipeline stage" \
  train "${small[@]}" --pipeline-model-parallel-size 3 --global-batch-size 2 --num-layers 4 $first 1
expect_job_error2 2 "$first \\(2\\) \\+ $last \\(2\\) must equal --num-layers \\(3\\)" \
  train "${small[@]}" --pipeline-model-parallel-size 2 --global-batch-size 2 --num-layers 3 $first 2 $last 2
expect_job_error2 3 "$first \\+ $last take 4 layers and --num-layers is 4: the 1 other pipeline stage" \
  train "${small[@]}" --pipeline-model-parallel-size 3 --global-batch-size 2 --num-layers 4 $first 2 $last 2
expect_job_error2 2 "$first \\(4\\) is more than --num-layers \\(3\\)" \
  train "${small[@]}" --pipeline-model-parallel-size 2 --global-batch-size 2 --num-layers 3 $first 4
expect_job_error2 2 "$last must be >= 1 \\(got 0\\)" \
  train "${small[@]}" --pipeline-model-parallel-size 2 --global-batch-size 2 --num-layers 3 $last 0
expect_job_error2 2 "$first \\(1\\) must be divisible by --virtual-pipeline-stages \\(2\\)" \
  train "${small[@]}" --pipeline-model-parallel-size 2 --global-batch-size 4 --num-layers 6 $first 1 \
  --pipeline-schedule interleaved --virtual-pipeline-stages 2
# calibrate: rank 0 alone finds the output unwritable; the job still ends,
# before any measuring, with the message once.
expect_job_error 2 '--output /proc/nonexistent/local.toml: cannot create directory /proc/nonexistent' \
  calibrate --quick --output /proc/nonexistent/local.toml
# Rank 0 alone fails a start-up check while the other ranks go on to the
# checks that count the ranks on the node (a collective before issue 38's
# fix: they waited there for rank 0 for ever). eval --json is checked on
# rank 0 only; --save's writer lock is rank 0's, held here by another
# process (flock(1) on the lock file, as a running `tessera train` holds it).
scratch=$(mktemp -d)
"$bin" train "${small[@]}" --save "$scratch/ck" > /dev/null 2>&1 || echo "FAIL: the checkpoint for eval"
expect_job_error2 2 '--json /proc/nonexistent/e.json: cannot create directory /proc/nonexistent' \
  eval --checkpoint "$scratch/ck" --json /proc/nonexistent/e.json
mkdir -p "$scratch/held"
flock "$scratch/held/.tessera-writer.lock" sleep 60 &
holder=$!
for _ in $(seq 50); do  # until the holder has the lock
  flock -n "$scratch/held/.tessera-writer.lock" true 2>/dev/null || break
  sleep 0.1
done
expect_job_error2 2 "--save $scratch/held is being written by another process" \
  train "${small[@]}" --save "$scratch/held"
expect_job_error2 4 "--save $scratch/held is being written by another process" \
  train "${small[@]}" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --global-batch-size 2 --num-layers 2 --save "$scratch/held"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
rm -rf "$scratch"

# And a valid two-rank run trains to the end.
if ! timeout 120 "$mpirun" -n 2 "$bin" train "${small[@]}" --zero-stage 1 > /tmp/tessera_mpi_ok.$$ 2>&1 ||
   ! timeout 120 "$mpirun" -n 2 "$bin" train "${small[@]}" --tensor-model-parallel-size 2 \
       --sequence-parallel --zero-stage 3 >> /tmp/tessera_mpi_ok.$$ 2>&1; then
  fail "a valid 2-rank run failed:"; sed 's/^/    /' /tmp/tessera_mpi_ok.$$
fi
rm -f /tmp/tessera_mpi_ok.$$

# A valid uneven split from a --config file (the flags' TOML keys) trains to
# the end and says so in its header.
toml=/tmp/tessera_uneven_$$.toml
printf 'pipeline-model-parallel-size = 2\nnum-layers = 3\n%s = 1\n' \
  decoder-first-pipeline-num-layers > "$toml"
out=$(timeout 120 "$mpirun" -n 2 "$bin" train "${small[@]}" --config "$toml" --num-layers 3 2>&1)
status=$?
if [ "$status" -ne 0 ] || ! grep -q 'pp 2 (layers first 1)' <<<"$out" || ! grep -q '^step  *2' <<<"$out"; then
  fail "a valid uneven 2-rank run from $toml (exit $status):"; echo "$out" | tail -5 | sed 's/^/    /'
else
  echo "ok: -n 2 --config: $(grep -o 'pp 2 (layers first 1)' <<<"$out" | head -1)"
fi
rm -f "$toml"

finish "multi-rank bad-input case(s) failed" "all multi-rank bad-input cases exit cleanly with one message"

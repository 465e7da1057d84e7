#!/usr/bin/env bash
# The `local` system calibrated for the run (bridge/run_calibration.h): `plan
# --config` of a one-rank run measures this machine at the run's threads
# over the run's shapes once, caches it per shape, and `plan` and `train
# --dry-run` then predict from that file; `--system local` keeps the
# shipped file; a two-rank run gets the calibrate command that makes its
# calibration, and once that has run, plan uses it.
# Usage: test_run_calibration.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
scratch_dir
cd "$tmp"
unset TESSERA_RUN_CALIBRATION  # CTest turns it off for every other test
export XDG_CACHE_HOME=$tmp/cache
step() { sed -nE 's/^  step ([0-9.]+) s.*/\1/p' "$1" | head -1; }

cat > run.toml <<'TOML'
num-layers = 2
hidden-size = 64
num-attention-heads = 4
seq-length = 32
micro-batch-size = 4
global-batch-size = 8
train-iters = 10
threads = 1
TOML

"$bin" plan --config run.toml > plan1.out 2> plan1.err || { cat plan1.err; fail "plan exited $?"; }
grep -q 'measuring this machine for the run (1 rank x 1 threads' plan1.err ||
  fail "the first plan did not measure the run"
cached=$(ls cache/tessera/systems/runs/local-1x1-*.toml 2>/dev/null | grep -v model | head -1)
[ -n "$cached" ] || fail "no run calibration cached under cache/tessera/systems/runs"
grep -q "this run's calibration" plan1.err || fail "plan did not say it used the run's calibration"
# Cached: the second plan measures nothing and predicts the same step.
"$bin" plan --config run.toml > plan2.out 2> plan2.err || fail "second plan failed"
grep -q 'measuring' plan2.err && fail "the second plan measured again"
[ -n "$(step plan1.out)" ] && [ "$(step plan1.out)" = "$(step plan2.out)" ] ||
  fail "cached plan step '$(step plan2.out)' differs from '$(step plan1.out)'"
# train --dry-run of the same run: the same file, the same prediction.
"$bin" train --config run.toml --dry-run > dry.out 2> dry.err || { cat dry.err; fail "dry run failed"; }
grep -q "$cached" dry.out || fail "the dry run did not plan on $cached"
predicted=$(sed -nE 's/^predicted step: ([0-9.]+) s.*/\1/p' dry.out)
awk -v a="$predicted" -v b="$(step plan1.out)" 'BEGIN { exit !(a - b < 0.0006 && b - a < 0.0006) }' ||
  fail "dry run predicts $predicted s, plan $(step plan1.out) s"
# --system local: the file as it is, no run calibration.
"$bin" plan --config run.toml --system local > local.out 2> local.err || fail "--system local failed"
grep -q "this run's calibration" local.err && fail "--system local used the run's calibration"
# Another shape is another calibration.
sed 's/micro-batch-size = 4/micro-batch-size = 2/' run.toml > other.toml
"$bin" plan --config other.toml > other.out 2> other.err || fail "plan of another shape failed"
grep -q 'measuring this machine' other.err || fail "another micro-batch reused the first calibration"

# Two ranks: the command that calibrates them, which plan then uses.
sed 's/^threads = 1/tensor-model-parallel-size = 2\nthreads = 1/' run.toml > tp2.toml
"$bin" plan --config tp2.toml > tp2.out 2> tp2.err || fail "plan of a 2-rank run failed"
# The command follows "make it with:", wrapped over lines ending in " \".
advice=$(awk '/make it with:$/ { on = 1; next }
              on { sub(/^ +/, ""); if (sub(/ \\$/, "")) printf "%s ", $0; else { print; exit } }' tp2.err)
# Every line of the note fits 100 columns (the cache paths made it 250).
awk 'length($0) > 100' tp2.err | grep -q . && fail "the note has lines over 100 columns"
[ -n "$advice" ] || { cat tp2.err; fail "no calibrate command for the 2-rank run"; }
cmd=${advice/scripts\/mpirun.sh/$src/scripts/mpirun.sh}
cmd=${cmd/ tessera / $bin }
$cmd --quick > calib.out 2>&1 || { cat calib.out; fail "the advised calibrate failed: $cmd"; }
"$bin" plan --config tp2.toml > tp2b.out 2> tp2b.err || fail "plan after calibrating failed"
grep -q "this run's calibration" tp2b.err || { cat tp2b.err; fail "plan did not use the 2-rank calibration"; }
# Two ranks measure the collectives against the ring model, and the cores.
cal=$(ls "$XDG_CACHE_HOME"/tessera/systems/runs/local-2x*.toml 2>/dev/null | grep -v model | head -1)
[ -n "$cal" ] || fail "no 2-rank calibration file under the cache"
for key in all_reduce_factor reduce_scatter_factor all_gather_factor cores; do
  grep -Eq "^$key = [0-9.]+$" "$cal" || fail "the 2-rank calibration has no $key: $cal"
done

finish "failure(s)" "all run-calibration checks ok"

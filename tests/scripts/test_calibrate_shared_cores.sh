#!/usr/bin/env bash
# `tessera calibrate` with more ranks than the machine has cores (4 ranks on
# CI's 2): one rank per core measures the kernels while the others sleep, the
# file says so, and a plan on it adds what sharing a core costs (core
# sharing), rather than tables that already hold that sharing (which the
# planner then counted twice).
# Usage: test_calibrate_shared_cores.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cores" -ge 4 ]; then
  echo "skip: $cores cores hold 4 ranks of one thread; nothing is shared"
  exit 77
fi
scratch_dir
cd "$tmp"

"$src/scripts/mpirun.sh" -n 4 "$bin" calibrate --quick --threads 1 --output four.toml \
  > calib.out 2>&1 || { cat calib.out; fail "calibrate on 4 ranks exited $?"; }
grep -q "kernels on $cores rank(s) at once, one per core" calib.out ||
  { cat calib.out; fail "the 4-rank calibration did not measure on one rank per core"; }
grep -q "^# 4 ranks on $cores core(s): the kernels were measured by $cores rank(s), one per core" four.toml ||
  fail "four.toml does not say its kernels were measured one rank per core"
grep -q "^ranks = 4$" four.toml || fail "four.toml does not record the 4 ranks"
grep -q "^kernel_ranks = $cores$" four.toml || fail "four.toml does not record its $cores kernel ranks"
grep -q "^devices = 4 " four.toml || fail "four.toml's node is not the 4 ranks"

# dp 4 on those cores: every rank busy at once, so two share each core and
# the planner adds their turns (one rank's compute again, or near it).
TESSERA_RUN_CALIBRATION=0 "$bin" plan --model "$src/configs/models/tiny-local.toml" \
  --system four.toml --devices 4 --tp 1 --pp 1 --micro-batch 2 --global-batch-size 8 \
  --precision fp32 --json plan.json > plan.out 2>&1 || { cat plan.out; fail "plan on four.toml failed"; }
python3 - plan.json <<'PY' || fail "the dp 4 plan on 4 ranks x $cores cores adds no core sharing"
import json, sys
d = json.load(open(sys.argv[1]))
best = d["top"][0]
assert best["layout"]["dp"] == 4, best["layout"]
assert best["time"]["core_sharing"] > 0.3 * best["step_seconds"], best["time"]
PY
! grep -q "measuring its kernels at once" plan.out || fail "a fresh calibration warned as an old one"

# The same file as a calibration from before kernel_ranks was written, when
# all four ranks measured at once: the planner warns to calibrate again (the
# plan itself is the same: the tables are).
grep -v "^kernel_ranks = " four.toml > old.toml
TESSERA_RUN_CALIBRATION=0 "$bin" plan --model "$src/configs/models/tiny-local.toml" \
  --system old.toml --devices 4 --tp 1 --pp 1 --micro-batch 2 --global-batch-size 8 \
  --precision fp32 --json old.json > old.out 2>&1 || { cat old.out; fail "plan on old.toml failed"; }
grep -q "calibrated by 4 rank(s) x 1 thread(s) on $cores core(s), every rank" old.out ||
  { cat old.out; fail "no warning for a calibration whose ranks all measured at once"; }
python3 - plan.json old.json <<'PY' || fail "the plan on the keyless file differs"
import json, sys
new, old = (json.load(open(f))["top"][0] for f in sys.argv[1:])
assert old["step_seconds"] == new["step_seconds"], (old["time"], new["time"])
PY

finish "failure(s)" "test_calibrate_shared_cores: ok"

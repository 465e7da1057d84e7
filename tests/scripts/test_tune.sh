#!/usr/bin/env bash
# `tessera tune` on a tiny model with 2 ranks (issue 14): the tuner runs
# real trials under scripts/mpirun.sh, records an injected invalid layout as
# a failed trial with train's own error line and goes on, writes the best
# layout as a config that `tessera train --config` runs, and --resume
# extends the log without repeating a layout; a trial's launcher can receive
# SIGTERM. Bad input: one line, exit 2.
# Usage: test_tune.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
scratch_dir
cd "$tmp"
launcher="$src/scripts/mpirun.sh -n 2"

cat > tiny.toml <<'EOF'
num-layers = 2
hidden-size = 64
num-attention-heads = 4
seq-length = 32
micro-batch-size = 2
global-batch-size = 8
train-iters = 10
lr = 1e-3
EOF

"$bin" tune --config tiny.toml --launcher "$launcher" --budget-trials 3 --steps 4 --warmup 1 \
  --include "--tensor-model-parallel-size 3" --output best.toml --work-dir runs > tune.out 2>&1
rc=$?
cat tune.out
[ $rc -eq 0 ] || fail "tune exited $rc"
log=runs/tune.jsonl
[ "$(wc -l < $log)" -eq 3 ] || fail "expected 3 trials in $log, got $(wc -l < $log)"
# Trial 1 is the injected layout: failed, with train's reason, and the tuner went on.
head -1 $log | grep -q '"status":"failed"' || fail "trial 1 not recorded as failed"
head -1 $log | grep -q 'not divisible by --tensor-model-parallel-size (3)' ||
  fail "trial 1's reason is not train's error line"
[ "$(grep -c '"status":"ok"' $log)" -eq 2 ] || fail "trials 2 and 3 did not both run"
grep -q '^trial 3 of 3' tune.out || fail "no progress line for trial 3"
grep -q 'best so far' tune.out || fail "no best-so-far on the progress lines"
grep -q '^planner error on the ok trials' tune.out || fail "no planner error line"
# Every ok trial measured a positive step time.
python3 - "$log" <<'PY' || fail "a trial's numbers are wrong"
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["status"] == "ok":
        assert t["measured"] > 0 and t["memory"] > 0 and t["predicted_before"] > 0, t
PY
# The best layout is the fastest ok trial, and its file trains.
[ -s best.toml ] || fail "no best.toml"
grep -q '^tensor-model-parallel-size = ' best.toml || fail "best.toml has no layout"
$src/scripts/mpirun.sh -n 2 "$bin" train --config best.toml --train-iters 2 --no-progress \
  > train.out 2>&1 || { cat train.out; fail "tessera train --config best.toml failed"; }

# --resume: one more trial, appended; no layout run twice.
"$bin" tune --config tiny.toml --launcher "$launcher" --budget-trials 1 --steps 4 --warmup 1 \
  --resume $log --work-dir runs > resume.out 2>&1 || { cat resume.out; fail "tune --resume failed"; }
grep -q '^resumed 3 trial(s)' resume.out || fail "--resume did not read the 3 trials"
[ "$(wc -l < $log)" -eq 4 ] || fail "--resume did not append trial 4"
[ "$(python3 -c "import json,sys; print(len({json.loads(l)['layout'] for l in open('$log')}))")" -eq 4 ] ||
  fail "--resume repeated a layout"
grep -q '^trial 4 of 4:' resume.out || fail "the resumed trial is not numbered 4 of 4"
# A budget beyond the space (as an exhaustive pass gives): the progress line
# counts the layouts left, not the budget (one trial, then --budget-seconds).
"$bin" tune --config tiny.toml --launcher "$launcher" --budget-trials 100000 --budget-seconds 1 \
  --steps 4 --warmup 1 --resume $log --work-dir runs > wide.out 2>&1 || { cat wide.out; fail "tune --resume (wide budget) failed"; }
left=$(sed -n 's/^trial 5 of \([0-9]*\):.*/\1/p' wide.out)
[[ -n "$left" && $left -gt 5 && $left -lt 1000 ]] ||
  fail "a budget of 100000 over a small space: progress 'trial 5 of ${left:-?}', wanted the layouts left"

# A trial's launcher gets SIGTERM and SIGINT unblocked (the tuner kills a
# hung trial with TERM; scripts/mpirun.sh passes TERM on to the ranks), though
# tessera's main() blocks both in its own threads (train/exit_signals.h).
cat > show_mask.sh <<EOF
#!/usr/bin/env bash
grep '^SigBlk:' /proc/self/status > $tmp/launcher_mask
exit 3
EOF
chmod +x show_mask.sh
"$bin" tune --config tiny.toml --launcher "$tmp/show_mask.sh" --budget-trials 1 --steps 4 \
  --warmup 1 --work-dir masked > mask.out 2>&1
blocked=$(awk '{print $2}' launcher_mask 2> /dev/null)
if [ -z "$blocked" ]; then
  fail "the launcher did not run: $(cat mask.out)"
elif (( 16#$blocked & 0x4002 )); then  # bit 14: SIGTERM (15), bit 1: SIGINT (2)
  fail "the trial's launcher started with SIGTERM or SIGINT blocked (SigBlk $blocked)"
fi

# Bad input: exit 2 and the message (a warning may come first: the calibration
# file names another CPU on some machines).
printf 'num-layers = 2\nbogus-key = 1\n' > bad.toml
expect_exit 2 'bogus-key' tune --config bad.toml
expect_exit 2 '--budget-trials must be >= 1' tune --config tiny.toml --budget-trials 0
expect_exit 2 "--launcher: 'no-such-launcher' is not a program" \
  tune --config tiny.toml --launcher "no-such-launcher -n 2"
expect_exit 2 'no layout of this model fits 2 rank' \
  tune --config tiny.toml --ranks 2 --max-memory-gb 0.000001
expect_exit 2 "--include .*'--bogus' is not a layout flag" \
  tune --config tiny.toml --include "--bogus 1"

finish "failure(s)" "test_tune: ok"

#!/usr/bin/env bash
# `tessera tune` leaves nothing of a trial behind and never waits on it
# (issue 38, item 5). A trial's output goes to a file, so a helper that
# still holds it cannot keep the tuner waiting; the tuner is the subreaper
# of its trials, so what a launcher started in another process group or
# session is found and killed once the launcher is gone:
#   1. a launcher that leaves a helper in its own session and one in its
#      own process group (both holding the trial's output), then runs the
#      trial: tune finishes, and neither helper is left;
#   2. a hung trial under scripts/mpirun.sh whose ranks ignore SIGTERM,
#      killed at --trial-timeout: recorded as a timeout, and no rank, no
#      mpirun and no grace timer is left (they used to run on for the
#      launcher's 60 s grace).
# Usage: test_tune_leftovers.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
command -v setsid > /dev/null || { echo "skip: no setsid"; exit 77; }
tmp=$(mktemp -d)

# The pids of processes running exactly `sleep $1` (a duration only this
# test uses).
sleepers() {
  local f pid
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    [ "$( { tr "\0" " " < "$f"; } 2> /dev/null)" = "sleep $1 " ] && echo "$pid"
  done
}
# Whatever this test's helpers are still doing, by their unique durations.
cleanup() {
  local d
  for d in 3737 3838 3939; do
    for p in $(sleepers $d); do kill -9 "$p" 2> /dev/null; done
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1

cat > tiny.toml <<'TOML'
num-layers = 1
hidden-size = 32
num-attention-heads = 2
seq-length = 16
micro-batch-size = 2
global-batch-size = 4
train-iters = 10
TOML

# ---- 1. a launcher that leaks helpers -----------------------------------------
cat > leaky.sh <<'SH'
#!/usr/bin/env bash
setsid sleep 3737 &  # a session of its own, with the trial's output as stdout
set -m
sleep 3838 &         # a process group of its own
set +m
exec "$@"
SH
chmod +x leaky.sh
start=$(date +%s)
timeout 120 "$bin" tune --config tiny.toml --launcher "$tmp/leaky.sh" --ranks 1 --budget-trials 1 \
  --steps 3 --warmup 1 --work-dir leaky > leaky.out 2>&1
rc=$?
took=$(($(date +%s) - start))
[ $rc -eq 0 ] || { cat leaky.out; fail "1: tune exited $rc after $took s"; }
grep -q '"status":"ok"' leaky/tune.jsonl 2> /dev/null || fail "1: the trial was not ok: $(cat leaky/tune.jsonl)"
left="$(sleepers 3737) $(sleepers 3838)"
if [ -n "${left// /}" ]; then
  fail "1: the launcher's helpers outlived the trial: pids $left"
else
  echo "ok: 1: tune finished in $took s, and no helper of the trial's launcher is left"
fi

# ---- 2. a hung trial under scripts/mpirun.sh, killed at the timeout -----------------
cat > hung.sh <<SH
#!/usr/bin/env bash
exec "$src/scripts/mpirun.sh" -n 2 bash -c 'trap "" TERM; sleep 3939 & wait \$!; wait \$!'
SH
chmod +x hung.sh
start=$(date +%s)
timeout 120 "$bin" tune --config tiny.toml --launcher "$tmp/hung.sh" --ranks 2 --budget-trials 1 \
  --steps 3 --warmup 1 --trial-timeout 4 --work-dir hung > hung.out 2>&1
rc=$?
took=$(($(date +%s) - start))
grep -q '"status":"timeout"' hung/tune.jsonl 2> /dev/null ||
  fail "2: the hung trial is not recorded as a timeout (tune exit $rc): $(cat hung.out)"
left=$(sleepers 3939 | tr '\n' ' ')
if [ -n "$left" ] || [ "$took" -gt 30 ]; then
  fail "2: after $took s, the hung trial's ranks are still there: pids ${left:-none}"
else
  echo "ok: 2: the hung trial was a timeout after $took s, and none of its ranks is left"
fi

finish "failure(s)" "test_tune_leftovers: ok"

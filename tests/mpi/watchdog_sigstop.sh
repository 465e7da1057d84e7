#!/usr/bin/env bash
# watchdog_sigstop.sh TESSERA_BINARY MPIRUN RANKS STOPPED_RANK TRAIN_FLAGS...
#
# Freezes one rank of a training job with SIGSTOP (as a stuck node or a
# debugger would) once it has trained a few steps, and checks the watchdog's
# verdict on every other rank: each must print a report, and each report
# must say that its rank waits on the stopped one, whichever group the
# survivor is stuck in (the stopped rank's own tp/dp/pp group, or a group
# the stopped rank is not in at all). The job must then end non-zero.
#
# Timing: --comm-timeout 5 s (a tiny model's collectives take milliseconds,
# so 5 s is no false alarm even with 4 ranks on 2 loaded cores), detection
# within 1.25 x 5 s, a 2 s stall window, a 2.5 s grace before the abort:
# about 15 s a case. Everything runs under `timeout`.
set -uo pipefail
bin=$1
mpirun=$2
ranks=$3
stopped=$4
shift 4

work=$(mktemp -d /tmp/tessera_sigstop.XXXXXX)
marker="sigstop-$$-$RANDOM"
pid=""
cleanup() {
  # The stopped process must not outlive the test (mpirun kills it with
  # SIGKILL when the job aborts; this is for a job that did not).
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The job: trains "forever" (the watchdog ends it), a metrics line per step.
TESSERA_SIGSTOP_MARKER=$marker timeout -k 10 150 "$mpirun" -n "$ranks" "$bin" train \
  --num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16 \
  --train-iters 1000000 --no-progress --peak-tflops 1 --log-interval 1 \
  --metrics-file "$work/metrics.jsonl" --comm-timeout 5 "$@" > "$work/out" 2>&1 &
job=$!

# The stopped rank's process: the one with our marker and its world rank
# (Open MPI passes the launcher's environment to every rank).
find_rank() {
  local p
  for p in $(pgrep -f -- "$bin train" 2>/dev/null); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "TESSERA_SIGSTOP_MARKER=$marker" &&
       tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$stopped"; then
      echo "$p"
      return
    fi
  done
}

# Wait for a few steps (up to 90 s: startup is slow on a loaded machine).
for _ in $(seq 900); do
  [ -f "$work/metrics.jsonl" ] && [ "$(grep -c '"step"' "$work/metrics.jsonl")" -ge 3 ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
pid=$(find_rank)
if [ -z "$pid" ]; then
  echo "FAIL: world rank $stopped of the job not found running"
  cat "$work/out"
  exit 1
fi
kill -STOP "$pid"
stopped_at=$(date +%s)
wait "$job"
status=$?
took=$(( $(date +%s) - stopped_at ))
cat "$work/out"
echo "---- world rank $stopped (pid $pid) stopped; the job exited $status after $took s"

failures=0
if [ "$status" -eq 0 ]; then
  echo "FAIL: the job exited 0"
  failures=$((failures + 1))
fi
if ! grep -q "aborting the job: a collective exceeded --comm-timeout" "$work/out"; then
  echo "FAIL: the watchdog did not abort the job (timeout or another failure)"
  failures=$((failures + 1))
fi
for ((r = 0; r < ranks; r++)); do
  [ "$r" -eq "$stopped" ] && continue
  line=$(grep -E "^tessera: world rank $r waits on world rank [0-9]+" "$work/out" | head -1)
  if ! grep -q "^tessera: comm watchdog on world rank $r:" "$work/out"; then
    echo "FAIL: world rank $r printed no watchdog report"
    failures=$((failures + 1))
  elif ! grep -Eq "^tessera: world rank $r waits on world rank $stopped, STOPPED" <<<"$line"; then
    echo "FAIL: world rank $r does not name world rank $stopped as stopped: ${line:-no verdict}"
    failures=$((failures + 1))
  else
    echo "ok: $line"
  fi
done
[ "$failures" -eq 0 ] || exit 1
echo "every surviving rank names world rank $stopped"

#!/usr/bin/env bash
# scripts/mpirun.sh and its helpers (issue 38, item 5). A reader of the
# launcher's output must see EOF when the launcher exits, and nothing the
# launcher started may outlive it:
#   1. SIGTERM to a job whose ranks die of it: EOF within 5 s (the grace
#      timer's `sleep` used to hold the output open for the whole 60 s
#      default), and no process left in the launcher's session;
#   2. ranks that ignore SIGTERM: the grace timer (TESSERA_MPIRUN_GRACE=3)
#      ends the job after 3 s, not before, and then nothing is left;
#   3. the launcher SIGKILLed while its grace timer runs: the timer ends the
#      job at once and exits, so nothing is left within a few seconds;
#   4. a bad TESSERA_MPIRUN_GRACE is one line and exit 2.
# Each case runs the launcher in a session of its own (setsid), so what it
# leaves behind is every process of that session.
# Usage: test_mpi_launcher.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
src=$(realpath "$2")
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
command -v setsid > /dev/null || { echo "skip: no setsid"; exit 77; }
tmp=$(mktemp -d)

# The pids of session $1 and their command names, one "pid name" a line.
session_members() {
  local stat line rest pid
  for stat in /proc/[0-9]*/stat; do
    { read -r line < "$stat"; } 2> /dev/null || continue
    rest=${line##*) }  # state ppid pgrp session ...
    read -r _ _ _ sid _ <<<"$rest"
    [ "$sid" = "$1" ] || continue
    pid=${stat#/proc/}
    pid=${pid%/stat}
    name=${line#*(}
    echo "$pid ${name%%)*}"
  done
}
cleanup() {  # whatever a failed case left, by session
  local s
  for s in "${sessions[@]}"; do
    session_members "$s" | while read -r pid _; do kill -9 "$pid" 2> /dev/null; done
  done
  rm -rf "$tmp"
}
sessions=()
trap cleanup EXIT

# start_job RANK_COMMAND...: the launcher on 2 ranks in its own session,
# its output into a FIFO this shell reads on fd 3; waits until both ranks
# run. Sets launcher (its pid, also its session).
start_job() {
  rm -f "$tmp/out"
  mkfifo "$tmp/out"
  setsid "$mpirun" -n 2 "$@" > "$tmp/out" 2>&1 &
  launcher=$!
  exec 3< "$tmp/out"
  sessions+=("$launcher")
  local i
  for ((i = 0; i < 300; i++)); do
    [ "$(session_members "$launcher" | grep -c ' sleep$')" -ge 2 ] && return 0
    sleep 0.1
  done
  fail "the ranks did not start within 30 s"
}

# read_to_eof LIMIT: reads fd 3 until EOF or LIMIT seconds; sets took.
read_to_eof() {
  local t0 line rc
  t0=$(now)
  eof=0
  while :; do
    IFS= read -r -t 1 -u 3 line && continue
    rc=$?
    [ "$rc" -gt 128 ] || { eof=1; break; }  # 1: EOF; > 128: this second's timeout
    [ "$(awk -v e="$(elapsed "$t0")" -v l="$1" 'BEGIN { print (e >= l) }')" = 1 ] && break
  done
  took=$(elapsed "$t0")
  exec 3<&-
}

# check_eof CASE CONDITION WANT: the reader saw EOF, after `took` seconds
# that meet CONDITION (awk, on t).
check_eof() {
  if [ "$eof" -eq 1 ] && [ "$(awk -v t="$took" "BEGIN { print ($2) }")" = 1 ]; then
    echo "ok: $1: EOF $took s after the signal"
  else
    fail "$1: the reader saw EOF: $eof after $took s (want $3)"
  fi
}

# no_leftovers NAME WITHIN: the launcher's session is empty within WITHIN s.
no_leftovers() {
  local i left
  for ((i = 0; i < $2 * 10; i++)); do
    left=$(session_members "$launcher")
    [ -z "$left" ] && { echo "ok: $1: nothing left of the launcher's session"; return 0; }
    sleep 0.1
  done
  fail "$1: left behind after ${2} s: $(tr '\n' ',' <<<"$left")"
}

# ---- 1. SIGTERM, ranks die of it -----------------------------------------------
start_job sleep 30
kill -TERM "$launcher"
read_to_eof 10
wait "$launcher"
check_eof 1 't < 5' "EOF within 5 s"
no_leftovers 1 2

# ---- 2. ranks ignore SIGTERM: the grace timer ends the job --------------------------
export TESSERA_MPIRUN_GRACE=3
start_job bash -c 'trap "" TERM; sleep 30 & wait $!; wait $!'
kill -TERM "$launcher"
read_to_eof 15
wait "$launcher"
check_eof 2 't >= 2.5 && t < 10' "EOF after the 3 s grace, within 10 s"
no_leftovers 2 3

# ---- 3. the launcher SIGKILLed while its timer runs ---------------------------------
export TESSERA_MPIRUN_GRACE=60
start_job bash -c 'trap "" TERM; sleep 30 & wait $!; wait $!'
kill -TERM "$launcher"
for ((i = 0; i < 50; i++)); do  # the timer is up: a second process group besides mpirun's
  [ "$(session_members "$launcher" | grep -c ' sleep$')" -ge 3 ] && break
  sleep 0.1
done
kill -KILL "$launcher"
wait "$launcher" 2> /dev/null
read_to_eof 15
check_eof 3 't < 8' "EOF within 8 s of the SIGKILL"
no_leftovers 3 5
unset TESSERA_MPIRUN_GRACE

# ---- 4. a bad grace --------------------------------------------------------------
out=$(TESSERA_MPIRUN_GRACE=soon "$mpirun" -n 1 true 2>&1)
status=$?
if [ "$status" -ne 2 ] || [ "$(grep -c . <<<"$out")" -ne 1 ] ||
  ! grep -q "TESSERA_MPIRUN_GRACE must be a number of seconds >= 0 (got 'soon')" <<<"$out"; then
  fail "4: TESSERA_MPIRUN_GRACE=soon: exit $status: $out"
else
  echo "ok: 4: $out"
fi

finish "failure(s)" "the launcher closes its output and leaves nothing behind"

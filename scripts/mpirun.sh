#!/usr/bin/env bash
# mpirun with the flags tessera needs on one machine, in a container, as root:
#   --allow-run-as-root   Open MPI refuses root otherwise (containers run as root)
#   --oversubscribe       more ranks than cores (tests use 4 ranks on 2 cores)
#   --bind-to none        ranks and their OpenMP / comm threads float freely;
#                         binding each rank to one core starves its helper threads
#   --mca btl self,vader  shared memory only: no network probing (there is none)
#   --mca mpi_yield_when_idle 1
#                         a rank waiting in MPI yields its core instead of
#                         spinning, which is what lets oversubscribed ranks progress
# Vader's default single-copy mechanism (CMA) works here and is faster than
# `btl_vader_single_copy_mechanism none`, so it is left alone.
# On a Slurm cluster use srun instead. Extra flags: TESSERA_MPIRUN_EXTRA.
# Usage: scripts/mpirun.sh -n 4 build/tessera train ...
#
# Signals. Open MPI 4's mpirun does not pass SIGTERM or SIGINT on: it ends
# the job (SIGCONT to the ranks, SIGTERM one second later, SIGKILL one second
# after that; odls_base_sigkill_timeout), too soon for
# `tessera train --exit-signal-handler` to finish its step and save. So this
# script keeps mpirun out of the terminal's process group (a Ctrl-C reaches
# only the script) and hands the first SIGTERM or SIGINT it gets straight to
# the ranks, mpirun's children on this machine. If the job has not ended
# TESSERA_MPIRUN_GRACE seconds later (default 60: a rank stuck in a
# collective cannot reach a step's end), or at a second signal, mpirun gets
# SIGTERM and ends the job its way. Ranks without a handler die at the first
# signal, as with mpirun alone.
#
# The grace timer is a helper of this script, never a holder of its output:
# its stdin, stdout and stderr are /dev/null (a reader of this script's
# output sees EOF when the script exits, not when a timer's `sleep` does),
# it runs in a process group of its own that the script kills whole when
# it exits (the subshell and its `sleep`), and it sleeps in one-second
# steps: if the script is killed (SIGKILL, which it cannot trap), the timer
# ends the job at once and exits, so no helper outlives the script by more
# than about a second.
set -euo pipefail

# Sets `ppid` to the parent pid in a line of /proc/PID/stat (procps may be
# missing), or to "" when PID is gone.
read_ppid() {  # read_ppid PID
  local line rest
  ppid=
  { read -r line < "/proc/$1/stat"; } 2> /dev/null || return 0
  rest=${line##*) }  # after the command name, which may hold spaces
  rest=${rest#* }    # after the state: the parent pid comes first
  ppid=${rest%% *}
}

# The pids whose parent is $1.
children_of() {
  local stat pid
  for stat in /proc/[0-9]*/stat; do
    pid=${stat#/proc/}
    pid=${pid%/stat}
    read_ppid "$pid"
    [ "$ppid" != "$1" ] || echo "$pid"
  done
}

grace=${TESSERA_MPIRUN_GRACE:-60}
if ! [[ "$grace" =~ ^[0-9]+(\.[0-9]*)?$ ]]; then
  echo "mpirun.sh: TESSERA_MPIRUN_GRACE must be a number of seconds >= 0 (got '$grace')" >&2
  exit 2
fi

# grace_timer SECONDS LAUNCHER: after SECONDS (a fraction counts as a whole
# second), or as soon as LAUNCHER (this script, the timer's parent) is
# gone, SIGTERM to mpirun.
grace_timer() {
  local left=${1%%.*}
  [[ "$1" =~ ^[0-9]+\.?0*$ ]] || left=$((10#$left + 1))
  left=$((10#$left))
  while [ "$left" -gt 0 ]; do
    sleep 1
    # Reparented: the launcher is gone (killed; a zombie counts as gone),
    # and its job ends now rather than run on with nobody to wait for it.
    read_ppid "$BASHPID"
    [ "$ppid" = "$2" ] || break
    left=$((left - 1))
  done
  kill -s TERM "$job" 2> /dev/null || true
}

# Job control: mpirun runs in a process group of its own, so the terminal's
# SIGINT does not reach it, and with SIGINT and SIGQUIT at their defaults
# (a background job without job control would ignore them). Its stdin is
# /dev/null: a background process group reading the terminal would stop.
set -m
mpirun --allow-run-as-root --oversubscribe --bind-to none \
  --mca btl self,vader --mca mpi_yield_when_idle 1 ${TESSERA_MPIRUN_EXTRA:-} "$@" < /dev/null &
job=$!
signals=0
timer=
on_signal() {  # on_signal NAME
  signals=$((signals + 1))
  if [ "$signals" -eq 1 ]; then
    local ranks
    ranks=$(children_of "$job")
    if [ -z "$ranks" ]; then  # not started yet: nothing to save
      kill -s TERM "$job" 2> /dev/null || true
      return 0
    fi
    kill -s "$1" $ranks 2> /dev/null || true
    grace_timer "$grace" $$ < /dev/null > /dev/null 2>&1 &
    timer=$!  # under set -m also the timer's process group
  else
    kill -s TERM "$job" 2> /dev/null || true
  fi
  return 0
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT

# wait returns early (status > 128) when a trapped signal arrives; wait again
# until mpirun itself has exited, and exit with its status.
while :; do
  before=$signals
  status=0
  wait "$job" || status=$?
  [ "$signals" -ne "$before" ] || break
done
# The timer's whole group: the subshell and the sleep it is in.
[ -z "$timer" ] || kill -- -"$timer" 2> /dev/null || true
exit "$status"

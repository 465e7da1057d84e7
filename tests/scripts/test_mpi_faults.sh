#!/usr/bin/env bash
# Faults in multi-rank training jobs (issue 15, defects 2 and 7), each run
# through scripts/mpirun.sh as a user would, with tiny models:
#   1. a rank that fails alone (its --save or --trace cannot be written, or
#      the --save directory vanishes mid-run) ends a 2-rank and a tp2 x pp2
#      job with exit 2 within 10 s of its error line, with the watchdog off
#      (--comm-timeout 0), where the job used to wait forever;
#   2. SIGTERM to the launcher (or to one rank) with --exit-signal-handler:
#      every rank finishes its step, the job saves, says so in one line and
#      exits 143;
#      resuming from that checkpoint gives the uninterrupted run's losses
#      bit for bit (the metrics file's numbers compared as text);
#   3. kill -9 of one rank ends the job within 10 s; relaunching with --load
#      gives the uninterrupted run's losses bit for bit.
# 4. --exit-interval and --exit-duration-in-mins stop with exit 0 and one
#    line; one process without a launcher stops on SIGTERM with exit 143.
# No case can hang: every job runs under a deadline and is killed with its
# whole process tree past it (a failure).
# Usage: test_mpi_faults.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun="$src/scripts/mpirun.sh"
tmp=$(mktemp -d)
small=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 8 --no-progress --peak-tflops 1 --log-interval 1000
       --threads 1)
# Long runs to interrupt: the LR schedule is fixed by --lr-decay-iters, so a
# run of any --train-iters sees the same steps as the reference.
long=(--train-iters 1000000 --lr-warmup-iters 2 --lr-decay-iters 40)
tp2pp2=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)
job=
trap 'kill_tree "${job:-}"; rm -rf "$tmp"' EXIT


children_of() {  # the pids whose parent is $1
  local stat line rest
  for stat in /proc/[0-9]*/stat; do
    { read -r line < "$stat"; } 2> /dev/null || continue
    rest=${line##*) }
    rest=${rest#* }
    if [ "${rest%% *}" = "$1" ]; then stat=${stat#/proc/}; echo "${stat%/stat}"; fi
  done
}
kill_tree() {  # kill -9 a process and all its descendants
  [ -n "$1" ] || return 0
  local child
  for child in $(children_of "$1"); do kill_tree "$child"; done
  kill -9 "$1" 2> /dev/null
  return 0
}
# True when $1 <= $2 (seconds, decimals allowed).
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

# start LOG ARGS...: a job in the background; its pid in $job.
start() {
  local log=$1
  shift
  "$mpirun" "$@" > "$log" 2>&1 &
  job=$!
}
# wait_job LIMIT: waits for $job up to LIMIT seconds; its status in $status
# (999 when it had to be killed), the moment it ended in $ended.
wait_job() {
  local deadline=$(($(date +%s) + $1))
  while kill -0 "$job" 2> /dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
  if kill -0 "$job" 2> /dev/null; then
    kill_tree "$job"
    wait "$job" 2> /dev/null
    status=999
  else
    wait "$job"
    status=$?
  fi
  ended=$(now)
  job=
}
# wait_for LIMIT COMMAND...: polls COMMAND until true or LIMIT seconds pass.
wait_for() {
  local deadline=$(($(date +%s) + $1))
  shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    kill -0 "$job" 2> /dev/null || return 1
    sleep 0.1
  done
}
lines_at_least() { [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }
has_line() { [ -f "$2" ] && grep -Eq -- "$1" "$2"; }

# ---- 1. a rank that fails alone ---------------------------------------------

# expect_rank_error NAME RANKS PATTERN [--yank LINK] ARGS...: the job must print
# PATTERN and exit 2 within 10 s of that line. With --yank LINK (the --save
# directory, a symbolic link to a directory), LINK is pointed at a path that
# cannot be created once the first checkpoint exists (rename: atomic, so no
# save in flight can recreate it).
expect_rank_error() {
  local name=$1 ranks=$2 pattern=$3 yank=
  shift 3
  if [ "$1" = --yank ]; then yank=$2; shift 2; fi
  local log="$tmp/$name.log" seen=
  if [ -n "$yank" ]; then mkdir "$yank.dir" && ln -s "$yank.dir" "$yank"; fi
  start "$log" -n "$ranks" "$bin" train "${small[@]}" --comm-timeout 0 "$@"
  if [ -n "$yank" ]; then
    if ! wait_for 120 test -f "$yank/latest"; then
      wait_job 1
      fail "$name: no checkpoint to start from"; sed 's/^/    /' "$log"; return
    fi
    ln -s /proc/nonexistent/ck "$yank.new" && mv -T "$yank.new" "$yank"
  fi
  wait_for 120 has_line "$pattern" "$log" && seen=$(now)
  wait_job 60
  if [ -z "$seen" ] && has_line "$pattern" "$log"; then seen=$ended; fi  # printed just before the end
  if [ -z "$seen" ]; then
    fail "$name: no line /$pattern/ (exit $status)"; sed 's/^/    /' "$log"
  elif [ "$status" -ne 2 ]; then
    fail "$name: exit $status, want 2 (999: still running after 60 s)"; sed 's/^/    /' "$log"
  elif ! within "$(elapsed "$seen" "$ended")" 10; then
    fail "$name: the job took $(elapsed "$seen" "$ended") s to end after the error (want <= 10)"
  else
    echo "ok: $name: exit 2, $(elapsed "$seen" "$ended") s after: $(grep -E -- "$pattern" "$log" | head -1)"
  fi
}

# Unwritable outputs are refused before step 1, agreed by every rank (the
# output checks); a --save that fails later is the save_vanishes cases below.
expect_rank_error save_unwritable_np2 2 '--save /proc/nonexistent/ck: cannot create' \
  --train-iters 4 --save-interval 2 --save /proc/nonexistent/ck
expect_rank_error save_unwritable_tp2pp2 4 '--save /proc/nonexistent/ck: cannot create' \
  "${tp2pp2[@]}" --train-iters 4 --save-interval 2 --save /proc/nonexistent/ck
expect_rank_error trace_unwritable_tp2pp2 4 '--trace /proc/nonexistent/trace.json' \
  "${tp2pp2[@]}" --train-iters 4 --trace /proc/nonexistent/trace.json --trace-step 2
expect_rank_error save_vanishes_np2 2 '\[rank [0-9]\] ' --yank "$tmp/yank2" \
  "${long[@]}" --save "$tmp/yank2" --save-interval 1
expect_rank_error save_vanishes_tp2pp2 4 '\[rank [0-9]\] ' --yank "$tmp/yank4" \
  "${tp2pp2[@]}" "${long[@]}" --save "$tmp/yank4" --save-interval 1

# ---- 2 and 3: interrupted runs resume bit for bit ---------------------------

# compare_losses NAME GOT REF FIRST LAST: steps FIRST..LAST of GOT must be REF's.
compare_losses() {
  local name=$1 got=$2 ref=$3 first=$4 last=$5
  local a b
  a=$(losses "$got" | awk -v f="$first" -v l="$last" '$1 >= f && $1 <= l')
  b=$(losses "$ref" | awk -v f="$first" -v l="$last" '$1 >= f && $1 <= l')
  if [ -z "$b" ] || [ "$a" != "$b" ]; then
    fail "$name: losses of steps $first..$last differ from the uninterrupted run:"
    diff <(echo "$a") <(echo "$b") | head -10 | sed 's/^/    /'
    return 1
  fi
  echo "ok: $name: steps $first..$last equal the uninterrupted run bit for bit ($(echo "$b" | wc -l) steps)"
}

# resume_matches NAME STEP ARGS...: the reference run of STEP + 3 steps, and a
# run resumed from the checkpoint of STEP, with the layout ARGS; compares the
# interrupted run's metrics ($tmp/NAME.jsonl) and the resumed run's.
resume_matches() {
  local name=$1 step=$2
  shift 2
  local last=$((step + 3)) ranks=$1
  shift
  local lr=(--lr-warmup-iters 2 --lr-decay-iters 40 --train-iters "$last")
  start "$tmp/$name.ref.log" -n "$ranks" "$bin" train "${small[@]}" "$@" "${lr[@]}" \
    --metrics-file "$tmp/$name.ref.jsonl"
  wait_job 240
  [ "$status" -eq 0 ] || { fail "$name: reference run exited $status"; sed 's/^/    /' "$tmp/$name.ref.log"; return; }
  start "$tmp/$name.resume.log" -n "$ranks" "$bin" train "${small[@]}" "$@" "${lr[@]}" \
    --load "$tmp/$name.ck" --metrics-file "$tmp/$name.resume.jsonl"
  wait_job 240
  [ "$status" -eq 0 ] || { fail "$name: resumed run exited $status"; sed 's/^/    /' "$tmp/$name.resume.log"; return; }
  grep -q "resumed from .*step_0*$step " "$tmp/$name.resume.log" ||
    { fail "$name: did not resume from step $step:"; sed 's/^/    /' "$tmp/$name.resume.log"; return; }
  compare_losses "$name (before the interruption)" "$tmp/$name.jsonl" "$tmp/$name.ref.jsonl" 1 "$step"
  compare_losses "$name (resumed)" "$tmp/$name.resume.jsonl" "$tmp/$name.ref.jsonl" $((step + 1)) "$last"
}

# sigterm_resumes NAME RANKS TARGET LAYOUT...: TARGET "launcher" signals
# scripts/mpirun.sh, "one-rank" the last rank only (as a node's scheduler
# might): the ranks must agree to stop after the same step.
sigterm_resumes() {
  local name=$1 ranks=$2 target=$3
  shift 3
  local log="$tmp/$name.log"
  start "$log" -n "$ranks" "$bin" train "${small[@]}" "$@" "${long[@]}" --exit-signal-handler \
    --save "$tmp/$name.ck" --metrics-file "$tmp/$name.jsonl"
  if ! wait_for 120 lines_at_least "$tmp/$name.jsonl" 4; then  # the header and 3 steps
    wait_job 1; fail "$name: the job did not reach step 3"; sed 's/^/    /' "$log"; return
  fi
  local sent victim=$job
  [ "$target" = launcher ] || victim=$(children_of "$(children_of "$job" | head -1)" | tail -1)
  sent=$(now)
  kill -TERM "$victim"
  wait_job 60
  local line step
  line=$(grep -E '^tessera: stopped after step [0-9]+ of 1000000: SIGTERM \(--exit-signal-handler\); saved ' "$log")
  step=$(sed -E 's/^tessera: stopped after step ([0-9]+) .*/\1/' <<< "$line")
  if [ "$status" -ne 143 ] || [ "$(grep -c '^tessera: stopped' "$log")" -ne 1 ] || [ -z "$step" ]; then
    fail "$name: SIGTERM: exit $status (want 143) and one 'stopped after step' line:"
    sed 's/^/    /' "$log"; return
  fi
  echo "ok: $name: exit 143 $(elapsed "$sent" "$ended") s after SIGTERM to the $target: $line"
  resume_matches "$name" "$step" "$ranks" "$@"
}

# kill9_resumes NAME RANKS LAYOUT...
kill9_resumes() {
  local name=$1 ranks=$2
  shift 2
  local log="$tmp/$name.log"
  start "$log" -n "$ranks" "$bin" train "${small[@]}" "$@" "${long[@]}" --save-interval 1 \
    --save "$tmp/$name.ck" --metrics-file "$tmp/$name.jsonl"
  if ! wait_for 120 lines_at_least "$tmp/$name.jsonl" 4; then
    wait_job 1; fail "$name: the job did not reach step 3"; sed 's/^/    /' "$log"; return
  fi
  local launcher victim sent
  launcher=$(children_of "$job" | head -1)           # mpirun
  victim=$(children_of "$launcher" | tail -1)         # one rank
  sent=$(now)
  kill -9 "$victim"
  wait_job 60
  if [ "$status" -eq 0 ] || [ "$status" -eq 999 ] || ! within "$(elapsed "$sent" "$ended")" 10; then
    fail "$name: after kill -9 of a rank the job exited $status $(elapsed "$sent" "$ended") s later (want nonzero within 10 s)"
    sed 's/^/    /' "$log"; return
  fi
  echo "ok: $name: the job ended (exit $status) $(elapsed "$sent" "$ended") s after kill -9 of rank pid $victim"
  local step
  step=$(sed -E 's/^step_0*([0-9]+)$/\1/' "$tmp/$name.ck/latest")
  resume_matches "$name" "$step" "$ranks" "$@"
}

sigterm_resumes sigterm_np2_zero1 2 launcher --zero-stage 1
sigterm_resumes sigterm_tp2pp2 4 launcher "${tp2pp2[@]}"
sigterm_resumes sigterm_one_rank_tp2pp2 4 one-rank "${tp2pp2[@]}"
kill9_resumes kill9_np2_pp2 2 --pipeline-model-parallel-size 2

# ---- planned stops, and one process -----------------------------------------

# expect_stop NAME STATUS PATTERN COMMAND...: a run that must stop early with
# STATUS and print PATTERN once.
expect_stop() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local log="$tmp/$name.log"
  "$@" > "$log" 2>&1 &
  job=$!
  wait_job 120
  if [ "$status" -ne "$want" ] || [ "$(grep -Ec -- "$pattern" "$log")" -ne 1 ]; then
    fail "$name: exit $status (want $want) and one line /$pattern/:"; sed 's/^/    /' "$log"
  else
    echo "ok: $name: exit $status: $(grep -E -- "$pattern" "$log")"
  fi
}
expect_stop exit_interval_np2 0 '^tessera: stopped after step 3 of 20: --exit-interval 3; saved .*/step_000003$' \
  "$mpirun" -n 2 "$bin" train "${small[@]}" --train-iters 20 --exit-interval 3 --save "$tmp/interval.ck"
expect_stop exit_duration_np2 0 '^tessera: stopped after step 1 of 20: --exit-duration-in-mins 1e-06 reached .*; nothing saved \(no --save\)$' \
  "$mpirun" -n 2 "$bin" train "${small[@]}" --train-iters 20 --exit-duration-in-mins 0.000001
# One process, no launcher: the signal reaches tessera itself.
start_direct_and_term() {
  "$bin" train "${small[@]}" "${long[@]}" --exit-signal-handler --save "$tmp/single.ck" \
    --metrics-file "$tmp/single.jsonl" > "$tmp/single.log" 2>&1 &
  job=$!
  wait_for 120 lines_at_least "$tmp/single.jsonl" 3 && kill -TERM "$job"
  wait_job 60
  if [ "$status" -ne 143 ] || ! grep -Eq '^tessera: stopped after step [0-9]+ of 1000000: SIGTERM \(--exit-signal-handler\); saved ' "$tmp/single.log" ||
     [ ! -f "$tmp/single.ck/latest" ]; then
    fail "one process: SIGTERM gave exit $status:"; sed 's/^/    /' "$tmp/single.log"
  else
    echo "ok: one process: exit 143: $(grep '^tessera: stopped' "$tmp/single.log")"
  fi
}
start_direct_and_term

finish "multi-rank fault case(s) failed" "all multi-rank fault cases passed"

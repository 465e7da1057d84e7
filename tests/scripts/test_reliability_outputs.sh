#!/usr/bin/env bash
# Issue 38, classes 1, 2 and 7 (the save half), through the CLI:
# - an output never replaces what its path names: as root, a device node
#   (/dev/null's, made privately) stays a character device after tokenize encode/decode, train --metrics-file,
#   plan --json, eval --json; a named pipe stays a pipe (refused without a
#   reader, written through with one); a regular file is replaced whole;
# - one writer per --save: a second `tessera train` into a directory being
#   written is refused at start-up (exit 2, "DIR is being written by pid N on
#   HOST") and the first run finishes untouched; the lock of a killed run
#   never blocks the next one; readers (eval) are not locked out;
# - a save that fails on a full disk removes its `.step_N.tmp-PID` staging
#   directory, and the next run into that --save resumes.
# Usage: test_reliability_outputs.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
tmp=$(mktemp -d)
mounted=""
cleanup() {
  [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 2 --no-progress --peak-tflops 1)

ok() { echo "ok: $*"; }

# The device checks write to a private node of /dev/null's device (1,3), so
# that the defect, where present, replaces that node and not the machine's
# /dev/null.
devnull="$tmp/null"
still_devnull() {  # WHAT: $devnull is still the character device 1,3
  if [ -c "$devnull" ] && [ "$(stat -c '%t,%T' "$devnull")" = "1,3" ]; then ok "$1: the device is still a device"
  else
    fail "$1: the device node was replaced by a $(stat -c %F "$devnull")"
    rm -f "$devnull" && mknod -m 666 "$devnull" c 1 3
  fi
}

# ---- class 1: outputs never destroy ----------------------------------------
for i in $(seq 300); do echo "the quick brown fox $i jumps over the lazy dog"; done > text.txt
"$bin" tokenize train --input text.txt --vocab-size 300 --min-count 1 --output tok > /dev/null 2>&1 ||
  fail "tokenize train"
"$bin" tokenize encode --vocab tok --input text.txt --output a.tok > /dev/null 2>&1 || fail "encode a.tok"

if [ "$(id -u)" = 0 ] && mknod -m 666 "$devnull" c 1 3; then
  "$bin" tokenize encode --vocab tok --input text.txt --output "$devnull" > /dev/null 2>&1 ||
    fail "encode --output /dev/null exited $?"
  still_devnull "tokenize encode --output /dev/null"
  "$bin" tokenize decode --vocab tok --input a.tok --output "$devnull" > /dev/null 2>&1 ||
    fail "decode --output /dev/null"
  still_devnull "tokenize decode --output /dev/null"
  "$bin" train "${small[@]}" --train-iters 2 --metrics-file "$devnull" > /dev/null 2>&1 ||
    fail "train --metrics-file /dev/null"
  still_devnull "train --metrics-file /dev/null"
  "$bin" plan --system h100 --model gpt2-small --devices 8 --global-batch-size 8 --json "$devnull" \
    > /dev/null 2>&1 || fail "plan --json /dev/null"
  still_devnull "plan --json /dev/null"
else
  echo "skip: the device checks need root (mknod; a rename over a device node needs it too)"
fi

# A named pipe without a reader: refused at once, still a pipe.
mkfifo pipe
out=$(timeout 20 "$bin" tokenize encode --vocab tok --input text.txt --output pipe 2>&1)
status=$?
if [ "$status" -ne 2 ] || ! grep -q "pipe: is a named pipe with no reader" <<<"$out"; then
  fail "encode into a reader-less pipe: exit $status: $(tail -1 <<<"$out")"
else ok "$(grep 'named pipe' <<<"$out")"; fi
[ -p pipe ] && ok "encode: the pipe is still a pipe" || fail "encode replaced the pipe"
# With a reader, decode writes through the pipe.
cat pipe > from_pipe.txt &
reader=$!
sleep 0.2
timeout 20 "$bin" tokenize decode --vocab tok --input a.tok --output pipe > /dev/null 2>&1 ||
  fail "decode through a pipe with a reader"
wait "$reader"
[ -p pipe ] && ok "decode: the pipe is still a pipe" || fail "decode replaced the pipe"
"$bin" tokenize decode --vocab tok --input a.tok --output decoded.txt > /dev/null 2>&1 || fail "decode to a file"
if cmp -s from_pipe.txt decoded.txt; then ok "decode through the pipe: the same $(wc -c < decoded.txt) bytes as to a file"
else fail "decode through the pipe: $(wc -c < from_pipe.txt) bytes, want $(wc -c < decoded.txt)"; fi
# A regular file is replaced whole, through a symlink the link is kept.
echo old > b.tok
ln -s b.tok link.tok
"$bin" tokenize encode --vocab tok --input text.txt --output link.tok > /dev/null 2>&1 || fail "encode via link"
[ -L link.tok ] && cmp -s a.tok b.tok && ok "encode through a symlink replaces its target, keeps the link" ||
  fail "encode through a symlink"
leftover=$(find . -name '*.tmp-*' | head -1)
[ -z "$leftover" ] && ok "no temporaries left" || fail "temporary left: $leftover"

# ---- class 2: one writer per --save ----------------------------------------
# The first run trains until SIGTERM (then saves and exits 143).
"$bin" train "${small[@]}" --train-iters 1000000 --save ck --save-interval 50 --exit-signal-handler \
  > run1.log 2>&1 &
first=$!
for _ in $(seq 100); do  # until the first run holds the lock (it has trained a step)
  grep -q '^saved ck/step_000050' run1.log 2>/dev/null && break
  sleep 0.1
done
# MPI start-up (what a bad flag costs: `train --num-layers -1` is refused
# right after it) takes about a second on a loaded node; the lock is looked
# at before it, so the refusal is quicker than any MPI-checked error and
# under a second (issue 38). The best of three tries: one slow start under
# load says nothing about the check.
t0=$(date +%s%N)
"$bin" train --num-layers -1 > /dev/null 2>&1
floor_ms=$((($(date +%s%N) - t0) / 1000000))
ms=999999
for _ in 1 2 3; do
  t0=$(date +%s%N)
  out=$("$bin" train "${small[@]}" --train-iters 5 --save ck 2>&1)
  status=$?
  try_ms=$((($(date +%s%N) - t0) / 1000000))
  [ "$try_ms" -lt "$ms" ] && ms=$try_ms
  [ "$status" -eq 2 ] && [ "$ms" -lt 1000 ] && break
done
if [ "$status" -ne 2 ] || ! grep -Eq -- "--save ck is being written by pid $first on " <<<"$out"; then
  fail "second writer: exit $status: $(tail -1 <<<"$out")"
else ok "second writer refused in $ms ms (a bad flag: $floor_ms ms): $(grep 'being written' <<<"$out")"; fi
[ "$ms" -lt 1000 ] || fail "second writer took $ms ms (want < 1000; a bad flag $floor_ms ms)"
# A reader is not locked out while the first run writes.
"$bin" eval --checkpoint ck --eval-iters 1 > eval.log 2>&1 && ok "eval reads ck while it is written" ||
  { sleep 2; "$bin" eval --checkpoint ck --eval-iters 1 > eval.log 2>&1 || fail "eval of ck: $(tail -1 eval.log)"; }
kill -TERM "$first"
wait "$first"
rc=$?
last=$(grep -o 'saved ck/step_[0-9]*' run1.log | tail -1 | cut -d/ -f2)
[ "$rc" -eq 143 ] && [ -n "$last" ] && [ "$(cat ck/latest)" = "$last" ] &&
  ok "the first run finished untouched (exit 143, latest $last)" || fail "first run: rc $rc, $(tail -1 run1.log)"
[ ! -e ck/step_000005 ] && ok "no step of the refused run in ck" || fail "the refused run saved ck/step_000005"
n=$(ls -d ck/step_* | wc -l)
want=$(grep -o 'saved ck/step_[0-9]*' run1.log | sort -u | wc -l)
[ "$n" -eq "$want" ] && ok "ck holds the first run's $n steps" || fail "ck holds $n steps, want $want"

# A killed writer's lock file never blocks: kill -9 mid-run, then resume.
"$bin" train "${small[@]}" --train-iters 100000 --save ck --load ck --save-interval 1000 > run2.log 2>&1 &
second=$!
for _ in $(seq 100); do grep -q '^step ' run2.log 2>/dev/null && break; sleep 0.1; done
kill -9 "$second"
wait "$second" 2>/dev/null
[ -f ck/.tessera-writer.lock ] || fail "no lock file in ck"
# The killed run may have saved a step of its own before the kill landed
# (a quiet machine reaches step 1000 quickly): resume from what ck holds.
resumed=$(cat ck/latest)
next=$((10#${resumed#step_} + 2))
out=$("$bin" train "${small[@]}" --train-iters $next --save ck --load ck 2>&1)
grep -q "saved ck/step_$(printf %06d $next)" <<<"$out" && ok "resume after a killed writer (its lock file left) saves step $next" ||
  fail "resume after kill -9: $(tail -1 <<<"$out")"
# A leftover staging directory of a dead run does not block a resume either.
stale="ck/.step_$(printf %06d $((next + 1))).tmp-999999"
mkdir -p "$stale" && echo x > "$stale/junk"
out=$("$bin" train "${small[@]}" --train-iters $((next + 1)) --save ck --load ck 2>&1)
grep -q "saved ck/step_$(printf %06d $((next + 1)))" <<<"$out" && [ ! -e "$stale" ] &&
  ok "a dead run's staging directory is removed and the resume saves" || fail "stale staging: $(tail -1 <<<"$out")"

# ---- class 7: a save that fails on a full disk cleans up --------------------
if [ "$(id -u)" = 0 ] && mkdir -p full && mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
  mounted="$tmp/full"
  out=$("$bin" train "${small[@]}" --train-iters 2 --save full/ck 2>&1)
  status=$?
  grep -q "No space left on device" <<<"$out" && [ "$status" -eq 2 ] && ok "full disk: $(tail -1 <<<"$out")" ||
    fail "full disk: exit $status: $(tail -1 <<<"$out")"
  staging=$(find full/ck -name '.step_*.tmp-*' | head -1)
  [ -z "$staging" ] && ok "the failed save removed its staging directory" || fail "left behind: $staging"
  umount full && mounted=""
else
  echo "skip: the full-disk check needs root and a tmpfs mount"
fi

finish "failure(s)" "all passed"

#!/usr/bin/env bash
# The embedded corpus is built on first use into the cache (data/embedded_corpus.cpp).
# Every rank of a job does that at once on a fresh cache, so several
# processes build it together and each must find a complete copy after: a
# process that removed the winner's copy to rename its own in its place
# once left a rank reading a file that had just gone ("cannot open token
# data .../fortunes.tok (no such file)", seen in CI on a 2-rank run).
# Here: four processes start a tiny training on one fresh cache, four
# rounds. Every one must train; exactly one may say it "built" the corpus
# (the one whose copy went into place: the others, finding a complete copy
# there, keep it and say "reused" -- before the fix each replaced the last
# one's copy and said "built", which is the window that lost the file, so
# this fails whenever the builds overlap, not only when a read hits the
# window); no private build directory is left behind.
# Usage: test_corpus_first_build.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
scratch_dir
tiny=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --micro-batch-size 1
      --global-batch-size 1 --train-iters 1 --no-progress --threads 1 --eval-interval 0 --save "")
for round in 1 2 3 4; do
  cache=$tmp/cache$round
  pids=()
  for p in 1 2 3 4; do
    "$bin" train "${tiny[@]}" --cache-dir "$cache" >"$tmp/log$round.$p" 2>&1 &
    pids+=($!)
  done
  for p in 1 2 3 4; do
    wait "${pids[$((p - 1))]}" || { cat "$tmp/log$round.$p"; fail "round $round: process $p of 4 did not train"; }
  done
  built=$(grep -l "built the embedded fortunes corpus" "$tmp"/log$round.* | wc -l)
  [ "$built" -eq 1 ] || fail "round $round: $built processes say they built the corpus (want 1: a complete copy is never replaced)"
  left=$(find "$cache/corpus" -maxdepth 1 -name '*.tmp-*' | wc -l)
  [ "$left" -eq 0 ] || fail "round $round: $left private build directories left in $cache/corpus"
  echo "round $round: 4 processes trained, $built built the corpus"
done
finish "first-build check(s) failed" "four processes building the corpus at once all train"

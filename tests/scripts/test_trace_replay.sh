#!/usr/bin/env bash
# bench/trace_replay.py (docs/zero_bubble.md, "Where zb-h1's waiting goes")
# runs on a real trace, so the tool cannot rot: a tiny pp 2 zb-h1 run on 2
# ranks writes --trace, and the replay prints both ranks' per-kind
# durations (F, BI, W) and the measured and replayed ends. It checks that
# the tool reads the trace, not its figures (a loaded host moves them).
# Usage: test_trace_replay.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
scratch_dir
"$mpirun" -n 2 "$bin" train --num-layers 2 --hidden-size 32 --num-attention-heads 2 \
  --seq-length 16 --micro-batch-size 1 --global-batch-size 4 --train-iters 3 \
  --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 --no-progress --threads 1 \
  --eval-interval 0 --cache-dir "$tmp/cache" --trace "$tmp/trace.json" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "the traced zb-h1 run"; }
/usr/bin/python3 "$src/bench/trace_replay.py" "$tmp/trace.json" >"$tmp/replay" 2>&1 ||
  { cat "$tmp/replay"; fail "bench/trace_replay.py"; }
for want in "rank 0 F " "rank 1 BI " "rank 1 W " "measured: end" "replayed (latency 0.00): end"; do
  grep -qF "$want" "$tmp/replay" || { cat "$tmp/replay"; fail "the replay prints no '$want'"; }
done
echo "ok: bench/trace_replay.py replays a zb-h1 trace: $(grep -F 'measured: end' "$tmp/replay")"
finish "trace replay check(s) failed"

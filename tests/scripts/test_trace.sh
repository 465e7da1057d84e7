#!/usr/bin/env bash
# --trace writes a Chrome trace in every layout (issue 16, item 5: without
# pipeline parallelism it used to write nothing, silently), says where, and
# has one track per global rank named "rank R" with that rank's forward,
# backward, gradient reduction and optimizer spans of the traced step:
# - one process, 3 micro-batches (gradient accumulation);
# - 2 ranks, tensor parallel (no pipeline);
# - 2 ranks, pipeline parallel (the executor's actions, incl. send/recv),
#   even and uneven (--decoder-first-pipeline-num-layers): each pipeline
#   rank's track also names its stage and layers, "rank 1 (pp 1: layers 1-2)".
# Usage: test_trace.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
scratch_dir
cd "$tmp" || exit 1
small=(--num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --train-iters 3 --eval-interval 0 --no-progress --peak-tflops 1)

# check_trace NAME FILE RANKS EXPECTED_NAMES...: FILE is JSON with RANKS
# "rank R" tracks, each holding exactly EXPECTED_NAMES in order (the X
# events' names), with non-negative durations. TRACK_NOTES (a |-separated
# list, one per rank), when set: the tracks are "rank R (NOTE)".
check_trace() {
  local name=$1 file=$2 ranks=$3
  shift 3
  if ! TRACK_NOTES=${TRACK_NOTES:-} /usr/bin/python3 - "$file" "$ranks" "$@" <<'EOF'; then
import json, os, sys
path, ranks, want = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
events = json.load(open(path))["traceEvents"]
tracks = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
notes = os.environ["TRACK_NOTES"].split("|") if os.environ["TRACK_NOTES"] else None
assert tracks == {r: f"rank {r}" + (f" ({notes[r]})" if notes else "") for r in range(ranks)}, tracks
for r in range(ranks):
    got = [e["name"] for e in events if e["ph"] == "X" and e["pid"] == r]
    if want != ["*"]:
        assert got == want, f"rank {r}: {got}"
    assert got, f"rank {r}: no spans"
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X"), "negative duration"
EOF
    fail "$name: trace $file"
  fi
}

# One process, gradient accumulation over 3 micro-batches, step 2 traced.
out=$("$bin" train "${small[@]}" --global-batch-size 6 --trace t1.json --trace-step 2 2>&1)
grep -q "trace of step 2 (1 rank) written to t1.json" <<<"$out" ||
  { fail "one process: no line saying where the trace went"; echo "$out"; }
check_trace "one process" t1.json 1 "F mb0 c0" "B mb0 c0" "F mb1 c0" "B mb1 c0" \
  "F mb2 c0" "B mb2 c0" ReduceGrads OptimizerStep

# Two ranks, tensor parallel: the last step by default.
if "$src/scripts/mpirun.sh" -n 2 "$bin" train "${small[@]}" --global-batch-size 2 \
    --tensor-model-parallel-size 2 --trace t2.json > tp.log 2>&1; then
  grep -q "trace of step 3 (2 ranks) written to t2.json" tp.log ||
    { fail "tp2: no line saying where the trace went"; cat tp.log; }
  check_trace "tp2" t2.json 2 "F mb0 c0" "B mb0 c0" ReduceGrads OptimizerStep
else
  fail "tp2 run failed"; cat tp.log
fi

# Two ranks, pipeline parallel: the executor's own actions.
if "$src/scripts/mpirun.sh" -n 2 "$bin" train "${small[@]}" --global-batch-size 4 \
    --pipeline-model-parallel-size 2 --trace t3.json > pp.log 2>&1; then
  grep -q "trace of step 3 (2 ranks) written to t3.json" pp.log ||
    { fail "pp2: no line saying where the trace went"; cat pp.log; }
  TRACK_NOTES="pp 0: layers 0|pp 1: layers 1" check_trace "pp2" t3.json 2 "*"
else
  fail "pp2 run failed"; cat pp.log
fi

# Uneven stages: 3 layers, the first stage holds one.
if "$src/scripts/mpirun.sh" -n 2 "$bin" train "${small[@]}" --global-batch-size 4 --num-layers 3 \
    --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 1 --trace t4.json > pp_uneven.log 2>&1; then
  TRACK_NOTES="pp 0: layers 0|pp 1: layers 1-2" check_trace "pp2 uneven" t4.json 2 "*"
else
  fail "pp2 uneven run failed"; cat pp_uneven.log
fi

finish "failure(s)" "test_trace: all passed"

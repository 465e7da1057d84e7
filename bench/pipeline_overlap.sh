#!/usr/bin/env bash
# Gradient reduction hidden behind a pipeline's backward (issue 37): pp 2 x
# dp 2 (4 ranks; on this 2-core machine oversubscribed) with and without
# --overlap-grad-reduce, for each schedule, alternating ROUNDS times (default
# 3) so that the machine's drift falls on both alike. With the flag, ZeRO-0/1
# start a model chunk's layer reductions as the chunk's last Backward of the
# step ends; without it they all start after the flush. Printed per schedule:
# the median step time and the time the step waited on data-parallel
# communication (seconds_by_op "comm": on a pipelined ZeRO-0 step, the
# gradient all-reduces' wait and the gradient norm's), and the share of the
# no-overlap wait that overlap hides: 1 - wait(overlap) / wait(no overlap).
# Target: >= 50 % hidden.
# TINY=1 (CI, tests/bench): 2 layers of hidden 64, 3 steps, one round, 1F1B
# only: seconds, so a change that breaks the bench fails the suite.
# Usage: bench/pipeline_overlap.sh [BUILD_DIR]   env: ROUNDS=3 ZERO=0 SCHEDULES="1f1b gpipe interleaved" TINY=0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [ "${TINY:-0}" = 1 ]; then tiny=1; else tiny=0; fi
rounds=${ROUNDS:-$([ $tiny = 1 ] && echo 1 || echo 3)}
zero=${ZERO:-0}
schedules=${SCHEDULES:-$([ $tiny = 1 ] && echo 1f1b || echo 1f1b gpipe interleaved)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/pipeline_overlap.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $tiny = 1 ]; then
  shape=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --train-iters 3)
else
  shape=(--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 --train-iters 8)
fi
shape+=(--micro-batch-size 2 --global-batch-size 16 --pipeline-model-parallel-size 2
        --zero-stage "$zero" --eval-interval 0 --log-interval 100 --no-progress --save ""
        --peak-tflops 1 --threads 1)
for r in $(seq 1 "$rounds"); do
  for s in $schedules; do
    flags=(--pipeline-schedule "$s")
    [ "$s" = interleaved ] && flags+=(--virtual-pipeline-stages 2)
    for ov in off on; do
      extra=()
      [ $ov = on ] && extra=(--overlap-grad-reduce)
      name=$s.$ov.r$r
      "$root/scripts/mpirun.sh" -n 4 "$build/tessera" train "${shape[@]}" "${flags[@]}" "${extra[@]}" \
        --metrics-file "$out/$name.jsonl" > "$out/$name.log" 2>&1 ||
        { cat "$out/$name.log"; echo "run failed: $name"; exit 1; }
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "$rounds" $schedules <<'PY'
import json, statistics, sys
out, rounds, schedules = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    steps = []
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in open(f"{out}/{name}.r{r}.jsonl")]
        steps += [s for s in lines[1:] if "step_seconds" in s][2:]  # warm-up left out
    return (1e3 * statistics.median(s["step_seconds"] for s in steps),
            1e3 * statistics.median(s["seconds_by_op"].get("comm", 0) for s in steps))
print(f"{'schedule':<12} {'step ms off':>11} {'step ms on':>10} {'wait off':>9} {'wait on':>8} {'hidden':>7}")
for s in schedules:
    (a, wa), (b, wb) = load(f"{s}.off"), load(f"{s}.on")
    hidden = f"{100 * (1 - wb / wa):.0f}%" if wa > 0 else "-"
    print(f"{s:<12} {a:11.1f} {b:10.1f} {wa:7.1f}ms {wb:6.1f}ms {hidden:>7}")
PY

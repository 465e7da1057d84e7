#!/usr/bin/env bash
# Closes the planner's loop on this machine: trains 22 different 2-rank
# layouts of the default model (dp with ZeRO 0-3, micro-batch 4/8, tp, tp+SP,
# pp 1F1B/GPipe/ZB-H1 at m = 4 and 8, recompute full/selective, --bf16,
# --fp16, dropout, the overlap flags, an uneven 3 | 1 pipeline split) for a few steps with metrics
# files, and runs `tessera plan --validate` on them: error per layout and
# the mean absolute percentage error of step time and memory.
#
# This shared 2-core machine drifts in speed by 20-30 % within a minute or
# two (a calibration predicts the run right after it to a few percent, one
# two minutes later by 30 %; docs/planner.md). So the bench samples both
# sides across the same period: ROUNDS rounds (default 7: with 3, one slow
# phase in a layout's three runs set its median; ~3 min a round here), each a
# calibration of `local` under the runs' 2 ranks x 1 thread (GEMMs of the
# default model, the engine's other kernels, memory bandwidth, attention,
# MPI, overlap, sync waits) followed by every layout once. The validation
# pools each layout's repeats and predicts it on every calibration, taking
# the median.
#
# Usage: bench/planner_validation.sh [BUILD_DIR]
#   KEEP=DIR keeps the calibrations and the runs' logs and metrics there;
#   BY_OP=1 also prints each layout's time by kind of work;
#   ROUNDS=N rounds; PASSES=N calibration passes (default 2).
#   TINY=1 (CI, tests/bench): one round of four layouts (ZeRO-1, ZeRO-3,
#   tp 2, pp 2) of a 2-layer, hidden-64 model, 3 steps each, validated on
#   the shipped configs/systems/local.toml instead of a calibration (minutes
#   on the loaded host): seconds, so a change that breaks the bench fails
#   the suite. Its errors mean nothing.
#   MOE=1 (issue 35): the same loop over MoE layouts instead: the default
#   model with 4 experts of width 512, top-2 (dp with ZeRO 1 and 3, ep 2 by
#   all-to-all and by all-gather, ep 2 with ZeRO 3, tp 2, pp 2, a capacity
#   factor that drops tokens); with TINY=1 three of them on the tiny model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [[ -n "${KEEP:-}" ]]; then out=$KEEP; mkdir -p "$out"; else
  out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
tiny=${TINY:-0}
rounds=${ROUNDS:-$([ "$tiny" = 1 ] && echo 1 || echo 7)}
passes=${PASSES:-$([ "$tiny" = 1 ] && echo 1 || echo 2)}
mpirun="$root/scripts/mpirun.sh"
model=$root/configs/models/default-small.toml
common=(--config "$root/configs/default.toml" --train-iters 8 --eval-interval 0
        --log-interval 100 --no-progress --peak-tflops 1 --threads 1)
calib=(--micro-batch 2 4 8 --precisions bf16 fp16)
if [ "$tiny" = 1 ]; then
  model=$out/tiny-model.toml
  printf 'num-layers = 2\nhidden-size = 64\nnum-attention-heads = 4\nseq-length = 32\nvocab-size = 4096\n' \
    > "$model"
  common=(--config "$root/configs/default.toml" --num-layers 2 --hidden-size 64 --seq-length 32
          --train-iters 3 --eval-interval 0 --log-interval 100 --no-progress --peak-tflops 1
          --threads 1 --save "")
  calib=(--micro-batch 8)
fi
layouts=(
  "--zero-stage 0"
  "--zero-stage 1"
  "--zero-stage 2"
  "--zero-stage 3"
  "--zero-stage 1 --micro-batch-size 4"
  "--tensor-model-parallel-size 2"
  "--tensor-model-parallel-size 2 --sequence-parallel"
  "--pipeline-model-parallel-size 2 --micro-batch-size 4"
  "--pipeline-model-parallel-size 2 --micro-batch-size 4 --pipeline-schedule gpipe"
  "--zero-stage 0 --recompute-granularity full"
  "--zero-stage 1 --recompute-granularity selective"
  "--tensor-model-parallel-size 2 --micro-batch-size 4 --recompute-granularity full"
  "--zero-stage 1 --bf16"
  "--tensor-model-parallel-size 2 --sequence-parallel --bf16"
  "--zero-stage 1 --fp16"
  "--zero-stage 1 --attention-dropout 0.1 --hidden-dropout 0.1"
  "--zero-stage 1 --overlap-grad-reduce --overlap-param-gather"
  "--zero-stage 0 --overlap-grad-reduce"
  "--pipeline-model-parallel-size 2 --micro-batch-size 4 --decoder-last-pipeline-num-layers 1"
  "--pipeline-model-parallel-size 2 --micro-batch-size 2"
  "--pipeline-model-parallel-size 2 --micro-batch-size 4 --pipeline-schedule zb-h1"
  "--pipeline-model-parallel-size 2 --micro-batch-size 2 --pipeline-schedule zb-h1"
)
[ "$tiny" = 1 ] && layouts=("--zero-stage 1" "--zero-stage 3" "--tensor-model-parallel-size 2"
                            "--pipeline-model-parallel-size 2 --micro-batch-size 4")
if [ "${MOE:-0}" = 1 ]; then
  # The experts: 4 of width F (the dense MLP's 4h is 2 F: equal active GEMM
  # FLOPs per token at top-2), in the calibrated model too.
  ffn=$([ "$tiny" = 1 ] && echo 128 || echo 512)
  moe=(--num-experts 4 --moe-router-topk 2 --ffn-hidden-size "$ffn" --moe-aux-loss-coeff 0.01)
  common+=("${moe[@]}")
  cp "$model" "$out/moe-model.toml"
  printf 'num-experts = 4\nmoe-router-topk = 2\nffn-hidden-size = %s\n' "$ffn" >> "$out/moe-model.toml"
  model=$out/moe-model.toml
  layouts=(
    "--zero-stage 1"
    "--zero-stage 3"
    "--expert-model-parallel-size 2"
    "--expert-model-parallel-size 2 --moe-token-dispatcher-type allgather"
    "--expert-model-parallel-size 2 --zero-stage 3"
    "--tensor-model-parallel-size 2"
    "--pipeline-model-parallel-size 2 --micro-batch-size 4"
    "--zero-stage 1 --moe-expert-capacity-factor 1.0"
  )
  [ "$tiny" = 1 ] && layouts=("--zero-stage 1" "--expert-model-parallel-size 2"
                              "--tensor-model-parallel-size 2")
fi
systems=()
for ((r = 1; r <= rounds; r++)); do
  if [ "$tiny" = 1 ]; then
    systems=("$root/configs/systems/local.toml")
  else
  "$mpirun" -n 2 "$build/tessera" calibrate --threads 1 --passes "$passes" \
    --output "$out/local.r$r.toml" --model "$model" "${calib[@]}" > "$out/calibrate.r$r.log" 2>&1 || { cat "$out/calibrate.r$r.log"; exit 1; }
  systems+=("$out/local.r$r.toml")
  fi
  for i in "${!layouts[@]}"; do
    name=$(printf "layout%02d.r%d" $((i + 1)) "$r")
    # shellcheck disable=SC2086  # each layout is a list of flags
    "$mpirun" -n 2 "$build/tessera" train "${common[@]}" --metrics-file "$out/$name.jsonl" \
      ${layouts[$i]} > "$out/$name.log" 2>&1 || {
      echo "run failed: ${layouts[$i]}"; cat "$out/$name.log"; exit 1; }
  done
done
[ "$tiny" = 1 ] || grep -h "peak sgemm\|overlap" "$out"/calibrate.r*.log
"$build/tessera" plan --system "${systems[@]}" --validate "$out"/layout*.jsonl ${BY_OP:+--by-op}

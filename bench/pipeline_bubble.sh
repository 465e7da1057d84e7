#!/usr/bin/env bash
# Pipeline bubble on 2 ranks, small shape (LAYERS layers, default 8; hidden
# HIDDEN, default 192; 6 heads, seq 64, micro-batch 2): pp = 2 with 1F1B,
# GPipe and the zero-bubble zb-h1 and zbv (two chunks per rank in a V,
# docs/zero_bubble.md) on an even split, and 1F1B on the split `tessera plan` chooses for
# the shape (--decoder-first/last-pipeline-num-layers; the last stage also
# runs the LM head and loss), against one rank, for m = 2 .. 32
# micro-batches per step. Prints the median step time (steps 3..), the
# measured bubble (time a stage waited on the pipeline / step, from the
# trainer), the planner's chosen split, and the schedule's ideal (p - 1) / m
# and (p - 1) / (m + p - 1).
# Why these defaults: the head's GEMM is V x C per token against a layer's
# 12 C^2, so with the embedded corpus's V = 4096 it weighs V / 12C layers:
# 1.8 at C = 192, where moving one layer off the last stage can even the stages
# out (5 | 3), but 0.9 at C = 384, where no whole layer can (the even split
# idles ~20 % whatever m, and the planner rightly keeps it).
# TINY=1 (CI, tests/bench): 4 layers (zbv's 2 x 2 chunks) of hidden 96, m = 2,
# 3 steps: seconds, so a change that breaks the bench fails the suite.
# Usage: bench/pipeline_bubble.sh [BUILD_DIR]   env: LAYERS=8 HIDDEN=192 SYSTEM=local MS="2 4 8 16 32" TINY=0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [ "${TINY:-0}" = 1 ]; then tiny=1; else tiny=0; fi
layers=${LAYERS:-$([ $tiny = 1 ] && echo 4 || echo 8)}
hidden=${HIDDEN:-$([ $tiny = 1 ] && echo 96 || echo 192)}
system=${SYSTEM:-local}
ms=${MS:-$([ $tiny = 1 ] && echo 2 || echo 2 4 8 16 32)}
iters=$([ $tiny = 1 ] && echo 3 || echo 6)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/pipeline_bubble.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
shape=(--num-layers "$layers" --hidden-size "$hidden" --num-attention-heads 6 --seq-length 64
       --micro-batch-size 2 --train-iters $iters --log-interval 100 --no-progress --peak-tflops 1
       --eval-interval 0 --save "")
cat > "$out/shape.toml" <<EOF
num-layers = $layers
hidden-size = $hidden
num-attention-heads = 6
seq-length = 64
micro-batch-size = 2
global-batch-size = 4
train-iters = $iters
EOF
for m in $ms; do
  gb=$((2 * m))
  "$build/tessera" train "${shape[@]}" --global-batch-size $gb --threads 2 \
    --metrics-file "$out/one-$m.jsonl" > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
  for kind in 1f1b gpipe zb-h1 zbv; do
    v=$([ $kind = zbv ] && echo 2 || echo 1)  # zbv: two chunks per rank
    "$root/scripts/mpirun.sh" -n 2 "$build/tessera" train "${shape[@]}" --global-batch-size $gb \
      --pipeline-model-parallel-size 2 --pipeline-schedule $kind --virtual-pipeline-stages $v \
      --metrics-file "$out/$kind-$m.jsonl" > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
  done
  # The planner's split for this shape, m and system (even when no uneven
  # split beats it by 0.5 %).
  "$build/tessera" plan --config "$out/shape.toml" --search --system "$system" --devices 2 \
    --global-batch-size $gb --tp 1 --pp 2 --micro-batch 2 --schedule 1f1b --zero 0 \
    --recompute none --sequence-parallel off --precision fp32 --top 1 \
    --json "$out/plan-$m.json" > /dev/null
  split=$(python3 - "$out/plan-$m.json" <<'PY'
import json, sys
L = json.load(open(sys.argv[1]))["top"][0]["layout"]
f, l = L["decoder_first_pipeline_num_layers"], L["decoder_last_pipeline_num_layers"]
print((f"--decoder-first-pipeline-num-layers {f} " if f else "") +
      (f"--decoder-last-pipeline-num-layers {l}" if l else ""))
PY
  )
  echo "$split" > "$out/split-$m.txt"
  # shellcheck disable=SC2086  # $split is flags, split on purpose
  "$root/scripts/mpirun.sh" -n 2 "$build/tessera" train "${shape[@]}" --global-batch-size $gb \
    --pipeline-model-parallel-size 2 --pipeline-schedule 1f1b $split \
    --metrics-file "$out/split-$m.jsonl" > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
done
/usr/bin/python3 - "$out" "$layers" $ms <<'PY'
import json, statistics, sys, pathlib
out, layers, ms = pathlib.Path(sys.argv[1]), int(sys.argv[2]), [int(m) for m in sys.argv[3:]]
def load(name):
    steps = [json.loads(l) for l in (out / f"{name}.jsonl").read_text().splitlines()][1:][2:]
    ms = statistics.median(s["step_seconds"] for s in steps) * 1e3
    # "idle_fraction" (older metrics files: "bubble_fraction"): idle / total.
    bubble = statistics.median(s.get("idle_fraction", s.get("bubble_fraction", 0)) for s in steps)
    return ms, bubble
def split_name(m):
    L = json.load(open(out / f"plan-{m}.json"))["top"][0]["layout"]
    f, l = L["decoder_first_pipeline_num_layers"], L["decoder_last_pipeline_num_layers"]
    if not f and not l:
        return "even"
    first = f or layers - l
    return f"{first}|{l or layers - f}"
print(f"{'m':>3} {'1 rank ms':>10} {'1f1b ms':>8} {'gpipe ms':>9} {'1f1b bub':>9} {'gpipe bub':>10}"
      f" {'split':>6} {'split ms':>9} {'split bub':>10} {'(p-1)/m':>8} {'(p-1)/(m+p-1)':>14}")
for m in ms:
    one, _ = load(f"one-{m}")
    f_ms, f_b = load(f"1f1b-{m}")
    g_ms, g_b = load(f"gpipe-{m}")
    s_ms, s_b = load(f"split-{m}")
    print(f"{m:>3} {one:10.1f} {f_ms:8.1f} {g_ms:9.1f} {100*f_b:8.1f}% {100*g_b:9.1f}%"
          f" {split_name(m):>6} {s_ms:9.1f} {100*s_b:9.1f}% {100/m:7.1f}% {100/(m+1):13.1f}%")
# The zero-bubble schedules on the even split, beside 1F1B's (idle: time a
# stage waited / its pipeline time; with equal F, B, W the ideal idle is
# (p-1)/(m+p-1) for 1F1B and (p-1)/(3m+p-1) for zb-h1).
print(f"\n{'m':>3} {'1f1b ms':>8} {'zb-h1 ms':>9} {'zbv ms':>7} {'1f1b idle':>10} {'zb-h1 idle':>11}"
      f" {'zbv idle':>9} {'(p-1)/(3m+p-1)':>15}")
for m in ms:
    f_ms, f_b = load(f"1f1b-{m}")
    h_ms, h_b = load(f"zb-h1-{m}")
    v_ms, v_b = load(f"zbv-{m}")
    print(f"{m:>3} {f_ms:8.1f} {h_ms:9.1f} {v_ms:7.1f} {100*f_b:9.1f}% {100*h_b:10.1f}%"
          f" {100*v_b:8.1f}% {100/(3*m+1):14.1f}%")
PY

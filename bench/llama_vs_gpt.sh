#!/usr/bin/env bash
# A Llama-style and a GPT-style model of the same layers and width, trained
# in one run on one rank (issue 17): tokens/s, model FLOPs per token and
# TFLOP/s, and the step by kind of work, median over the timed steps. The
# Llama model: RMSNorm, SwiGLU at Megatron's 2/3 x 4 C width (so its MLP
# FLOPs equal GPT's), RoPE, grouped-query attention (2 query groups), untied
# output layer, no linear biases. The two alternate ROUNDS times (default
# 3) so that the machine's drift falls on both alike.
# Target: the Llama model within 10 % of the GPT model's tokens/s.
# TINY=1 (CI, tests/bench): 2 layers of hidden 64, seq 32, one round of 4
# steps: seconds, so a change that breaks the bench fails the suite.
# Usage: bench/llama_vs_gpt.sh [BUILD_DIR]   env: ROUNDS=3 STEPS=12 PRECISION=fp32|bf16 TINY=0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if [ "${TINY:-0}" = 1 ]; then tiny=1; else tiny=0; fi
rounds=${ROUNDS:-$([ $tiny = 1 ] && echo 1 || echo 3)}
steps=${STEPS:-$([ $tiny = 1 ] && echo 4 || echo 12)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench/llama_vs_gpt.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $tiny = 1 ]; then
  shape=(--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 32
         --micro-batch-size 2 --global-batch-size 2)
else
  shape=(--num-layers 6 --hidden-size 384 --num-attention-heads 6 --seq-length 256
         --micro-batch-size 8 --global-batch-size 8)
fi
shape+=(--train-iters "$steps" --eval-interval 0 --log-interval 1000 --no-progress --save "")
[ "${PRECISION:-fp32}" = bf16 ] && shape+=(--bf16)
llama=(--normalization RMSNorm --swiglu --position-embedding-type rope
       --group-query-attention --num-query-groups 2 --untie-embeddings-and-output-weights
       --disable-bias-linear)
for r in $(seq 1 "$rounds"); do
  "$build/tessera" train "${shape[@]}" --metrics-file "$out/gpt.$r.jsonl" > "$out/gpt.$r.log" 2>&1 ||
    { cat "$out/gpt.$r.log"; exit 1; }
  "$build/tessera" train "${shape[@]}" "${llama[@]}" --metrics-file "$out/llama.$r.jsonl" \
    > "$out/llama.$r.log" 2>&1 || { cat "$out/llama.$r.log"; exit 1; }
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    steps = []
    for r in range(1, rounds + 1):
        lines = [json.loads(l) for l in open(f"{out}/{name}.{r}.jsonl")]
        steps += [s for s in lines[1:] if "step_seconds" in s][2:]  # warm-up left out
    med = lambda key: statistics.median(s[key] for s in steps)
    ops = {}
    for s in steps:
        for k, v in s["seconds_by_op"].items():
            ops.setdefault(k, []).append(v)
    return {"tok/s": med("tokens_per_second"), "step ms": 1e3 * med("step_seconds"),
            "GFLOP/token": steps[0]["model_flops"] / steps[0]["tokens"] / 1e9,
            "TFLOP/s": med("tflops_per_rank"),
            "ops": {k: 1e3 * statistics.median(v) for k, v in ops.items()}}
g, l = load("gpt"), load("llama")
print(f"{'':>14} {'GPT':>10} {'Llama':>10}")
for key in ("tok/s", "step ms", "GFLOP/token", "TFLOP/s"):
    print(f"{key:>14} {g[key]:10.3f} {l[key]:10.3f}")
print("step by kind of work, ms (median):")
for k in sorted(set(g["ops"]) | set(l["ops"]), key=lambda k: -max(g["ops"].get(k, 0), l["ops"].get(k, 0))):
    print(f"{k:>14} {g['ops'].get(k, 0):10.2f} {l['ops'].get(k, 0):10.2f}")
ratio = l["tok/s"] / g["tok/s"]
print(f"Llama / GPT tokens/s: {ratio:.3f} (target >= 0.90: {'met' if ratio >= 0.9 else 'NOT met'})")
PY

#!/usr/bin/env bash
# Shared experts (--moe-shared-expert-intermediate-size, with Megatron-LM's
# --moe-shared-expert-gate; docs/moe.md) under the layouts: the tiny MoE of
# moe_runs.sh (a capacity factor that drops) plus a gated shared expert of
# width 48, trained at EP 2 x DP 2 with ZeRO-3 and at EP 2 x PP 2 (4 ranks),
# equals one process on the same global batch (step 1 within 1e-5
# relative, all 10 steps within 1e-4; gradient norms too); so does an
# interleaved PP 2 run of 4 layers with MoE every 3rd layer, and full or
# selective recompute under dropout changes no bit. The shared
# expert is a dense parameter: replicated on every EP rank, its gradient
# reduced over dp x cp with the others, sharded by ZeRO-3. A checkpoint
# saved at EP 2 at step 5 resumes in one process to the uninterrupted
# run's losses, and `--load` into a run with another shared-expert width
# or without the gate is refused, naming the setting.
# Usage: test_moe_shared.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
scratch_dir
source "$(dirname "${BASH_SOURCE[0]}")/moe_runs.sh"  # model, run, compare
model+=(--moe-shared-expert-intermediate-size 48 --moe-shared-expert-gate)
run one 1 --train-iters 10
run ep2_dp2_zero3 4 --train-iters 10 --expert-model-parallel-size 2 --zero-stage 3
run ep2_pp2 4 --train-iters 10 --expert-model-parallel-size 2 --pipeline-model-parallel-size 2
compare "$tmp/one.jsonl" "$tmp/ep2_dp2_zero3.jsonl" shared_ep2_dp2_zero3 4
compare "$tmp/one.jsonl" "$tmp/ep2_pp2.jsonl" shared_ep2_pp2 4

# Layers of both kinds in one arena: 4 layers, MoE every 3rd (0 and 3),
# interleaved over PP 2 x 2 chunks: rank 0's chunks hold layers 0 (MoE)
# and 2 (dense), so its activation slot carves both (set_layer_kinds).
run one_freq3 1 --train-iters 10 --num-layers 4 --moe-layer-freq 3
run vpp_freq3 2 --train-iters 10 --num-layers 4 --moe-layer-freq 3 \
  --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 \
  --pipeline-schedule interleaved
compare "$tmp/one_freq3.jsonl" "$tmp/vpp_freq3.jsonl" shared_freq3_interleaved_pp2 2
# Recomputation (full, selective) with dropout changes no bit: the shared
# expert's views are kept and rewritten with the same values.
run drop 1 --train-iters 4 --hidden-dropout 0.1
run drop_full 1 --train-iters 4 --hidden-dropout 0.1 --recompute-granularity full
run drop_sel 1 --train-iters 4 --hidden-dropout 0.1 --recompute-granularity selective
/usr/bin/python3 - "$tmp/drop.jsonl" "$tmp/drop_full.jsonl" "$tmp/drop_sel.jsonl" <<'PY' ||
import json, sys
def steps(p):
    return [(s["loss"], s["grad_norm"]) for s in map(json.loads, open(p)) if "step" in s]
a, full, sel = map(steps, sys.argv[1:4])
assert len(a) == 4 and a == full == sel, (a, full, sel)
print("ok: full and selective recompute give the dropout run's bits")
PY
  fail "recompute changes the shared expert's run"

# Checkpoints: saved at EP 2, resumed in one process.
run save_ep2 2 --train-iters 10 --expert-model-parallel-size 2 --save "$tmp/ck" --save-interval 5
rm -rf "$tmp/ck/step_000010"
run load_one 1 --train-iters 10 --load "$tmp/ck"
compare "$tmp/one.jsonl" "$tmp/load_one.jsonl" shared_load_ep2_into_one 1 6
grep -q '"moe_shared_expert_intermediate_size": *48' "$tmp/ck/step_000005/metadata.json" ||
  fail "the checkpoint's metadata does not name the shared expert's width"
# Another width, or no gate: refused naming the difference.
expect_refusal 'holds a different model \(moe_shared_expert_intermediate_size 48 vs 32' \
  train "${model[@]}" --train-iters 10 --load "$tmp/ck" --moe-shared-expert-intermediate-size 32
no_gate=()
for a in "${model[@]}"; do [ "$a" = --moe-shared-expert-gate ] || no_gate+=("$a"); done
expect_refusal 'holds a different model \(moe_shared_expert_gate 1 vs 0' \
  train "${no_gate[@]}" --train-iters 10 --load "$tmp/ck"
# This GPT-2-block MoE with a capacity is neither Mixtral's (no shared
# expert) nor Qwen2-MoE's (Llama's block, q, k, v biases, dropless): export
# names what each lacks.
expect_refusal 'Mixtral needs .*no --moe-shared-expert-intermediate-size; Qwen2-MoE needs .*--add-qkv-bias and no --moe-expert-capacity-factor' \
  export --checkpoint "$tmp/ck" --output "$tmp/hf"

finish "shared-expert layout(s) differ from one process" \
  "MoE with a gated shared expert under EP 2 x DP 2 ZeRO-3, EP 2 x PP 2 and an EP 2 -> 1 checkpoint equals one process; --load refuses another width"

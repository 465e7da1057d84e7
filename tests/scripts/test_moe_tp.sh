#!/usr/bin/env bash
# Mixture of experts under tensor parallelism (Megatron's experts under TP;
# docs/moe.md): every tp rank routes the full token set with the replicated
# router, each expert's fc is split by columns and its proj by rows, and the
# partial outputs are summed as the dense MLP's. The tiny MoE of moe_runs.sh
# (4 experts, top-2, aux and z-loss, a capacity factor that drops) at TP 2,
# TP 2 with sequence parallelism, EP 2 x TP 2 and TP 2 x PP 2 (4 ranks),
# TP 2 + SP under hidden dropout and full recompute, and a Llama one
# (RMSNorm, SwiGLU experts without biases, a gated shared expert of width
# 48) at TP 2, each against one process over 10 steps: step 1 within 1e-5
# relative, every loss within 1e-4 (gradient norms 1e-5, then 1e-3). The
# Llama model's checkpoints reshard across tp: saved at TP 2 it resumes in
# one process, saved by one process it resumes at TP 2, both to the
# uninterrupted run's losses (steps 6-10). The Llama one with Qwen2-MoE's
# pre-softmax routing and q, k, v biases at EP 2 x TP 2.
# Usage: test_moe_tp.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
scratch_dir
source "$(dirname "${BASH_SOURCE[0]}")/moe_runs.sh"  # model, run, compare
model+=(--train-iters 10)
tp2=(--tensor-model-parallel-size 2)
run one 1
run tp2 2 "${tp2[@]}"
run tp2_sp 2 "${tp2[@]}" --sequence-parallel
run ep2_tp2 4 "${tp2[@]}" --expert-model-parallel-size 2
run tp2_pp2 4 "${tp2[@]}" --pipeline-model-parallel-size 2
compare "$tmp/one.jsonl" "$tmp/tp2.jsonl" tp2 2
compare "$tmp/one.jsonl" "$tmp/tp2_sp.jsonl" tp2_sp 2
compare "$tmp/one.jsonl" "$tmp/ep2_tp2.jsonl" ep2_tp2 4
compare "$tmp/one.jsonl" "$tmp/tp2_pp2.jsonl" tp2_pp2 4
# Hidden dropout (masks keyed by global rows) under SP, full recompute.
drop=(--hidden-dropout 0.1 --recompute-granularity full)
run one_drop 1 "${drop[@]}"
run tp2_sp_drop 2 "${tp2[@]}" --sequence-parallel "${drop[@]}"
compare "$tmp/one_drop.jsonl" "$tmp/tp2_sp_drop.jsonl" tp2_sp_dropout_full_recompute 2

# Llama blocks: SwiGLU experts ([gate | up] split per expert) and a gated
# shared expert; each run saves at step 5 for the resharding checks.
model+=(--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear
        --ffn-hidden-size 64 --moe-shared-expert-intermediate-size 48 --moe-shared-expert-gate)
run llama_one 1 --save "$tmp/ck1" --save-interval 5
run llama_tp2 2 "${tp2[@]}" --save "$tmp/ck2" --save-interval 5
compare "$tmp/llama_one.jsonl" "$tmp/llama_tp2.jsonl" llama_tp2 2
rm -rf "$tmp/ck1/step_000010" "$tmp/ck2/step_000010"
run llama_load_tp1 1 --load "$tmp/ck2"
run llama_load_tp2 2 "${tp2[@]}" --load "$tmp/ck1"
compare "$tmp/llama_one.jsonl" "$tmp/llama_load_tp1.jsonl" llama_save_tp2_load_tp1 1 6
compare "$tmp/llama_one.jsonl" "$tmp/llama_load_tp2.jsonl" llama_save_tp1_load_tp2 2 6
# Qwen2-MoE's routing (--moe-router-pre-softmax: the full softmax's top-k as
# gates) with q, k, v biases, at EP 2 x TP 2: the replicated routing and its
# backward are the one process's.
run qwen_one 1 --add-qkv-bias --moe-router-pre-softmax
run qwen_ep2_tp2 4 "${tp2[@]}" --expert-model-parallel-size 2 --add-qkv-bias --moe-router-pre-softmax
compare "$tmp/qwen_one.jsonl" "$tmp/qwen_ep2_tp2.jsonl" qwen_pre_softmax_ep2_tp2 4
finish "MoE under tensor parallelism differs from one process" \
  "MoE at TP 2, TP 2 + SP, EP 2 x TP 2, TP 2 x PP 2, Llama TP 2 and pre-softmax EP 2 x TP 2 equal one process; checkpoints reshard over tp"

#!/usr/bin/env bash
# Bad input to `tessera train`: each case must exit nonzero with one clear
# message naming the flag or file, before any heavy work (each case runs in
# well under a second), and never crash (exit codes >= 128 are signals).
# Usage: test_cli_errors.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
scratch_dir
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --no-progress)

expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  local out status
  out=$(timeout 20 "$bin" "$@" 2>&1)
  status=$?
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ]; then
    fail "tessera $* exited $status (want a clean nonzero exit)"
  elif ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "tessera $*: message does not match /$pattern/:"
    echo "$out" | sed 's/^/    /'
  else
    echo "ok: $(grep -E -- "$pattern" <<<"$out" | head -1)"
  fi
}

expect_error 'not expected: .*--bogus' train --bogus 3
expect_error '--num-attention-heads \(3\).*--hidden-size|--hidden-size \(32\) must be divisible by --num-attention-heads \(3\)' \
  train "${small[@]}" --num-attention-heads 3
expect_error '--global-batch-size \(3\) must be divisible by --micro-batch-size \(2\)' \
  train "${small[@]}" --global-batch-size 3
expect_error '--num-layers must be in \[1, 65536\] \(got 0\)' train "${small[@]}" --num-layers 0
expect_error '--lr must be > 0' train "${small[@]}" --lr -1
expect_error '--min-lr .* must be in \[0, --lr' train "${small[@]}" --lr 1e-4 --min-lr 1e-3
expect_error '--clip-grad must be >= 0' train "${small[@]}" --clip-grad -1
expect_error '--adam-beta2 must be in \[0, 1\)' train "${small[@]}" --adam-beta2 1.5
expect_error '--train-iters must be >= 1' train "${small[@]}" --train-iters 0
expect_error '--bf16 and --fp16 exclude each other' train "${small[@]}" --bf16 --fp16
expect_error '--loss-scale.*need --fp16' train "${small[@]}" --loss-scale 128
expect_error '--grad-reduce-in-bf16 needs --bf16' train "${small[@]}" --grad-reduce-in-bf16
expect_error '--grad-reduce-in-bf16 needs --bf16' train "${small[@]}" --fp16 --grad-reduce-in-bf16
expect_error '--overlap-param-gather needs --zero-stage 1 or 2' \
  train "${small[@]}" --overlap-grad-reduce --overlap-param-gather
expect_error '--overlap-param-gather needs --overlap-grad-reduce' \
  train "${small[@]}" --zero-stage 1 --overlap-param-gather
expect_error '--attention-dropout must be in \[0, 1\) \(got 1' train "${small[@]}" --attention-dropout 1
expect_error '--hidden-dropout must be in' train "${small[@]}" --hidden-dropout=-0.1
expect_error '--micro-batch-size.*(could not be converted|integer|valid)|Could not convert' \
  train "${small[@]}" --micro-batch-size two
expect_error "cannot open token data $tmp/missing.tok" train "${small[@]}" --data-path "$tmp/missing.tok"
printf 'not tokens' > "$tmp/garbage.bin"
expect_error "$tmp/garbage.bin: unknown token file format" train "${small[@]}" --data-path "$tmp/garbage.bin"
# llm.c shards: 256 int32 header (magic 20240520, version 1, token count), then uint16 ids.
llmc_shard() {  # llmc_shard FILE ID...
  local f=$1; shift
  /usr/bin/python3 -c 'import struct,sys
ids=[int(x) for x in sys.argv[2:]]
h=[20240520,1,len(ids)]+[0]*253
open(sys.argv[1],"wb").write(struct.pack("<256i",*h)+struct.pack("<%dH"%len(ids),*ids))' "$f" "$@"
}
llmc_shard "$tmp/short.bin" 1 2 3
# A GPT-2 llm.c shard defaults to GPT-2's vocabulary (50257), so it gets as far as the window check.
expect_error "fewer than 2 window\\(s\\) of --seq-length \\+ 1" train "${small[@]}" --data-path "$tmp/short.bin"
expect_error "fewer than 2 window\\(s\\) of --seq-length \\+ 1" \
  train "${small[@]}" --data-path "$tmp/short.bin" --vocab-size 10
llmc_shard "$tmp/big_id.bin" $(seq 1 9) $(seq 1 9) $(seq 1 9) 77 $(seq 1 9) $(seq 1 9) $(seq 1 9)
expect_error "$tmp/big_id.bin: token [0-9]+ has id 77, but the vocabulary has 10 tokens" \
  train "${small[@]}" --data-path "$tmp/big_id.bin" --vocab-size 10 --split-valid 0.5
expect_error "--vocab-file and --merge-file go together" \
  train "${small[@]}" --vocab-file "$tmp/vocab.json"
expect_error "--vocab-file/--merge-file need --data-path" \
  train "${small[@]}" --vocab-file "$tmp/vocab.json" --merge-file "$tmp/merges.txt"
expect_error "$tmp/vocab.json: no such file" \
  train "${small[@]}" --vocab-file "$tmp/vocab.json" --merge-file "$tmp/merges.txt" --data-path "$tmp/short.bin"
expect_error "--config $tmp/none.toml: cannot open" train --config "$tmp/none.toml"
mkfifo "$tmp/pipe.toml"
expect_error "--config $tmp/pipe.toml: .*named pipe" train --config "$tmp/pipe.toml"
printf 'num-layerz = 2\n' > "$tmp/unknown.toml"
expect_error "config $tmp/unknown.toml: unknown key 'num-layerz'" train --config "$tmp/unknown.toml"
printf 'lr = \n' > "$tmp/syntax.toml"
expect_error "config $tmp/syntax.toml: .*line 1" train --config "$tmp/syntax.toml"
expect_error "--peak-file $tmp/nopeak.json|peak" train "${small[@]}" --peak-file "$tmp/bad.json" --peak-tflops -1
printf '{"fp32_gemm_tflops": "x"}' > "$tmp/bad_peak.json"
expect_error "peak file $tmp/bad_peak.json is not a valid" train "${small[@]}" --peak-file "$tmp/bad_peak.json"
# Divergence is caught and reported with the step, not trained through.
expect_error 'loss is (nan|inf|-nan).* at step [0-9]+|gradient norm is (nan|inf).* at step' \
  train "${small[@]}" --lr 1e30 --min-lr 1e30 --clip-grad 0 --train-iters 20
# The planner: several systems only make sense when validating runs;
# calibrate names a model it cannot load before measuring anything.
expect_error '--system: several system files only with --validate' \
  plan --system frontier h100 --model gpt2-small --devices 8 --global-batch-size 8
# Context parallelism in the planner: a cp that does not cut the sequence
# into 2 x cp chunks, or the devices into cp groups, before any search.
expect_error '--cp 3: the sequence of 8192 tokens does not split into 2 x cp = 6 equal chunks' \
  plan --model llama-3-8b --system h100 --devices 64 --cp 3
expect_error '--cp 8: 12 devices do not split into cp groups of 8' \
  plan --model llama-3-8b --system h100 --devices 12 --cp 8
expect_error "--cp-comm-type must be p2p or all_gather \\(got 'ring'\\)" \
  plan --model llama-3-8b --system h100 --devices 64 --cp 2 --cp-comm-type ring
expect_error 'nonexistent-model' calibrate --quick --model nonexistent-model --output "$tmp/local.toml"
expect_error "--precisions: bf16, fp16 or none \\(got 'fp32'\\)" calibrate --quick --precisions fp32 \
  --output "$tmp/local.toml"

# The Llama family's flags (issue 17): shapes that cannot split, exit 2 with one line.
expect_llama_error() {  # expect_llama_error PATTERN ARGS...: also the exit status 2
  local pattern=$1
  shift
  expect_error "$pattern" "$@"
  timeout 20 "$bin" "$@" > /dev/null 2>&1
  local status=$?
  if [ "$status" -ne 2 ]; then
    fail "tessera $* exited $status (want 2)"
  fi
}
llama=(--num-layers 1 --hidden-size 48 --num-attention-heads 6 --seq-length 16
       --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --no-progress
       --normalization RMSNorm --swiglu --position-embedding-type rope
       --untie-embeddings-and-output-weights --disable-bias-linear)
expect_llama_error '--num-attention-heads \(6\) must be divisible by --num-query-groups \(4\)' \
  train "${llama[@]}" --group-query-attention --num-query-groups 4
expect_llama_error '--num-query-groups \(3\) must be divisible by --tensor-model-parallel-size \(2\)' \
  train "${llama[@]}" --group-query-attention --num-query-groups 3 \
  --tensor-model-parallel-size 2 --dry-run --dry-run-ranks 2
expect_llama_error 'rope needs an even head dimension \(--hidden-size / --num-attention-heads = 9\)' \
  train "${llama[@]}" --hidden-size 54
expect_llama_error '--ffn-hidden-size \(100\) must be divisible by --tensor-model-parallel-size \(8\)' \
  train "${llama[@]}" --hidden-size 96 --num-attention-heads 8 --ffn-hidden-size 100 \
  --tensor-model-parallel-size 8 --dry-run --dry-run-ranks 8
expect_llama_error '--ffn-hidden-size \(128, the --swiglu default 8/3 x hidden\) must be divisible by --tensor-model-parallel-size \(3\)' \
  train "${llama[@]}" --num-attention-heads 3 --tensor-model-parallel-size 3 --dry-run --dry-run-ranks 3
expect_llama_error '--group-query-attention needs --num-query-groups' train "${llama[@]}" --group-query-attention
expect_llama_error '--num-query-groups 2 needs --group-query-attention' train "${llama[@]}" --num-query-groups 2
expect_llama_error '--normalization must be LayerNorm or RMSNorm \(got .rmsnorm.\)' \
  train "${small[@]}" --normalization rmsnorm
expect_llama_error '--position-embedding-type must be learned_absolute or rope' \
  train "${small[@]}" --position-embedding-type alibi
expect_llama_error '--norm-epsilon must be a finite number > 0' train "${llama[@]}" --norm-epsilon 0
expect_llama_error '--rotary-base must be a finite number > 1' train "${llama[@]}" --rotary-base 1

# Mixture of experts (docs/moe.md): each bad combination is one line and
# exit 2, before anything is allocated.
moe=(--num-experts 4 --moe-router-topk 2)
expect_refusal '--moe-router-topk \(5\) must be <= --num-experts \(4\)' \
  train "${small[@]}" --num-experts 4 --moe-router-topk 5
expect_refusal '--num-experts must be >= 1 \(got -1\)' train "${small[@]}" --num-experts -1
expect_refusal '--moe-router-topk must be >= 1 \(got 0\)' train "${small[@]}" --num-experts 4 --moe-router-topk 0
expect_refusal '--moe-expert-capacity-factor must be a finite number > 0 \(got 0\)' \
  train "${small[@]}" "${moe[@]}" --moe-expert-capacity-factor 0
expect_refusal '--moe-expert-capacity-factor must be a finite number > 0 \(got -0.5\)' \
  train "${small[@]}" "${moe[@]}" --moe-expert-capacity-factor=-0.5
expect_refusal '--moe-router-load-balancing-type must be aux_loss, seq_aux_loss or none \(got .sinkhorn.\)' \
  train "${small[@]}" "${moe[@]}" --moe-router-load-balancing-type sinkhorn
expect_refusal '--moe-aux-loss-coeff must be a finite number >= 0' \
  train "${small[@]}" "${moe[@]}" --moe-aux-loss-coeff=-1
# The shared expert (--moe-shared-expert-intermediate-size) lives in the
# MoE layers; its gate needs it.
expect_refusal '--moe-shared-expert-intermediate-size needs --num-experts' \
  train "${small[@]}" --moe-shared-expert-intermediate-size 64
expect_refusal '--moe-shared-expert-intermediate-size must be >= 1 \(got -4\)' \
  train "${small[@]}" "${moe[@]}" --moe-shared-expert-intermediate-size=-4
expect_refusal '--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size > 0' \
  train "${small[@]}" "${moe[@]}" --moe-shared-expert-gate
expect_refusal '--moe-router-pre-softmax needs --num-experts' \
  train "${small[@]}" --moe-router-pre-softmax
# Hugging Face Qwen2-MoE files (hf_qwen2_moe.h): a config.json this engine
# does not compute is one line naming the key, before any weight is read.
qwen2_moe_config() {  # qwen2_moe_config DIR KEY=JSON...: a 2-layer Qwen2-MoE config.json, keys replaced
  local dir=$1; shift
  mkdir -p "$dir"; : > "$dir/model.safetensors"
  /usr/bin/python3 - "$dir/config.json" "$@" <<'PY'
import json, sys
c = {"model_type": "qwen2_moe", "hidden_size": 32, "intermediate_size": 64,
     "moe_intermediate_size": 64, "shared_expert_intermediate_size": 48,
     "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
     "max_position_embeddings": 16, "vocab_size": 300, "num_experts": 4,
     "num_experts_per_tok": 2, "norm_topk_prob": False, "decoder_sparse_step": 1,
     "mlp_only_layers": [], "use_sliding_window": False}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    c[k] = json.loads(v)
json.dump(c, open(sys.argv[1], "w"))
PY
}
qwen2_moe_config "$tmp/q_freq" 'mlp_only_layers=[0]'
expect_refusal '^tessera: error: config.json: decoder_sparse_step 1 and mlp_only_layers \[0\] make layers \[1\] MoE' \
  import --input "$tmp/q_freq" --output "$tmp/q_freq_out"
qwen2_moe_config "$tmp/q_none" 'decoder_sparse_step=3'
expect_refusal '^tessera: error: config.json: decoder_sparse_step and mlp_only_layers leave no MoE layer' \
  import --input "$tmp/q_none" --output "$tmp/q_none_out"
qwen2_moe_config "$tmp/q_width" 'mlp_only_layers=[1]' 'intermediate_size=96'
expect_refusal '^tessera: error: config.json: intermediate_size 96 but moe_intermediate_size 64 with dense layers' \
  import --input "$tmp/q_width" --output "$tmp/q_width_out"
qwen2_moe_config "$tmp/q_shared" 'shared_expert_intermediate_size=0'
expect_refusal '^tessera: error: config.json: shared_expert_intermediate_size 0' \
  import --input "$tmp/q_shared" --output "$tmp/q_shared_out"
qwen2_moe_config "$tmp/q_window" 'use_sliding_window=true'
expect_refusal '^tessera: error: config.json: use_sliding_window true' \
  import --input "$tmp/q_window" --output "$tmp/q_window_out"
# MoE under tensor parallelism splits the shared expert as the dense MLP.
expect_refusal '--moe-shared-expert-intermediate-size \(33\) must be divisible by --tensor-model-parallel-size \(2\)' \
  train "${small[@]}" "${moe[@]}" --moe-shared-expert-intermediate-size 33 \
  --tensor-model-parallel-size 2 --dry-run --dry-run-ranks 2
expect_refusal '--num-experts with --pipeline-schedule zb-h1 is not supported yet' \
  train "${small[@]}" "${moe[@]}" --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 \
  --dry-run --dry-run-ranks 2
# Expert parallelism: experts that do not split over the ranks, ep without
# experts, and ep x tp x pp that does not divide the world. Two data-
# parallel ranks need a global batch of two micro-batches.
ep_small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
          --micro-batch-size 2 --global-batch-size 4 --train-iters 2 --no-progress)
expect_refusal '--num-experts \(3\) must be divisible by --expert-model-parallel-size \(2\)' \
  train "${ep_small[@]}" --num-experts 3 --moe-router-topk 2 --expert-model-parallel-size 2 \
  --dry-run --dry-run-ranks 2
expect_refusal '--expert-model-parallel-size 2 needs an MoE model \(--num-experts\)' \
  train "${ep_small[@]}" --expert-model-parallel-size 2 --dry-run --dry-run-ranks 2
expect_refusal '--expert-model-parallel-size \(2\) x --tensor-model-parallel-size \(1\) x --pipeline-model-parallel-size \(2\) must divide the world size 2' \
  train "${small[@]}" "${moe[@]}" --num-layers 2 --expert-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --dry-run --dry-run-ranks 2
expect_refusal '--expert-model-parallel-size must be >= 1 \(got 0\)' \
  train "${small[@]}" "${moe[@]}" --expert-model-parallel-size 0
expect_refusal '--moe-token-dispatcher-type must be alltoall or allgather \(got .flex.\)' \
  train "${small[@]}" "${moe[@]}" --moe-token-dispatcher-type flex
expect_refusal '--num-experts with --pipeline-schedule zbv is not supported yet' \
  train "${small[@]}" "${moe[@]}" --pipeline-model-parallel-size 2 --pipeline-schedule zbv \
  --virtual-pipeline-stages 2 --dry-run --dry-run-ranks 2
# Expert parallelism where the engine does not run it: the split-backward
# schedules (as for any MoE model) and context parallelism.
expect_refusal '--num-experts with --pipeline-schedule zb-h1 is not supported yet' \
  train "${ep_small[@]}" "${moe[@]}" --num-layers 2 --expert-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1 --dry-run --dry-run-ranks 4
expect_refusal '--num-experts with --pipeline-schedule zbv is not supported yet' \
  train "${ep_small[@]}" "${moe[@]}" --num-layers 2 --expert-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --pipeline-schedule zbv --virtual-pipeline-stages 2 \
  --dry-run --dry-run-ranks 4
expect_refusal '--context-parallel-size 2 with --expert-model-parallel-size \(expert parallelism\) is not supported yet' \
  train "${small[@]}" "${moe[@]}" --context-parallel-size 2 --expert-model-parallel-size 2 \
  --dry-run --dry-run-ranks 2

# Context parallelism (docs/context_parallel.md): a layout it cannot hold is
# one line and exit 2 before anything is allocated, and so are the
# combinations the trainer does not run yet. --dry-run-ranks stands in for
# a launched job's ranks.
expect_refusal 'world size 1 is not divisible by --tensor-model-parallel-size \(1\) x --context-parallel-size \(2\) x --pipeline-model-parallel-size \(1\)' \
  train "${small[@]}" --context-parallel-size 2
expect_refusal '--seq-length \(18\) must be divisible into 2 x --context-parallel-size \(2\) = 4 equal chunks' \
  train "${small[@]}" --seq-length 18 --context-parallel-size 2 --dry-run --dry-run-ranks 2
# With SP each tp rank holds (T / cp) / tp rows: T = 20 cuts into 4 chunks
# for cp 2, but its 10 rows a cp rank do not split over tp 4.
expect_refusal '--seq-length \(20\) must be divisible by --tensor-model-parallel-size \(4\) x --context-parallel-size \(2\) with --sequence-parallel' \
  train "${small[@]}" --num-attention-heads 4 --seq-length 20 --context-parallel-size 2 \
  --tensor-model-parallel-size 4 --sequence-parallel --dry-run --dry-run-ranks 8
expect_refusal '--context-parallel-size 2 with --num-experts \(MoE layers\) is not supported yet' \
  train "${small[@]}" "${moe[@]}" --context-parallel-size 2 --dry-run --dry-run-ranks 2
expect_error '--cp-comm-type must be p2p or all_gather \(got .ring.\)' \
  train "${small[@]}" --cp-comm-type ring
expect_error '--context-parallel-size must be >= 1 \(got 0\)' train "${small[@]}" --context-parallel-size 0

# cp with tp + SP is accepted (docs/context_parallel.md).
if ! "$bin" train "${small[@]}" --context-parallel-size 2 --tensor-model-parallel-size 2 \
    --sequence-parallel --dry-run --dry-run-ranks 4 > "$tmp/cp_sp.log" 2>&1; then
  fail "cp 2 x tp 2 with --sequence-parallel was refused:"; cat "$tmp/cp_sp.log"
fi

# And a valid run still works: the errors above are not the only outcome.
if ! "$bin" train "${small[@]}" --peak-tflops 1 > "$tmp/ok.log" 2>&1; then
  fail "a valid small run failed:"; cat "$tmp/ok.log"
fi

finish "bad-input case(s) failed" "all bad-input cases give their message and a clean nonzero exit"

#!/usr/bin/env bash
# Issue 17: a Hugging Face Llama file through the CLI, as test_finetune.sh
# does for GPT-2.
# - a Llama file written independently (tests/ckpt/make_safetensors.py llama:
#   GQA 4 over 2, untied head, older files' rotary buffers) imports; configs
#   this engine cannot compute (rope_scaling, another hidden_act) are
#   refused with one line naming the key;
# - `train --load IMPORT --finetune --use-checkpoint-args` starts from the
#   file's weights (a zero-embedding file gives loss ln(V) exactly at step 1)
#   and its loss falls;
# - the fine-tune exports as Llama (config.json's model_type, bos/eos), and
#   `eval --safetensors` of the export gives `eval --checkpoint`'s loss, on
#   one process and under tp 2.
# Usage: test_finetune_llama.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then echo "SKIP: needs $py with numpy"; exit 77; fi
scratch_dir
cd "$tmp" || exit 1
make_llama() { "$py" "$src/tests/ckpt/make_safetensors.py" llama "$@" > /dev/null || exit 1; }
# The files' shape: 2 layers, hidden 64, 4 heads over 2 kv heads, intermediate
# 128, 64 positions, vocabulary 4096 (the embedded corpus's BPE).
batch=(--micro-batch-size 2 --global-batch-size 4 --no-progress --peak-tflops 1
       --attention-dropout 0 --hidden-dropout 0 --lr 3e-3 --lr-warmup-iters 0 --threads 1)

# ---- import: what a config may and may not say -------------------------------
make_llama llama --kv-heads 2 --untied --inv-freq
make_llama zero --kv-heads 2 --untied --zero-head
make_llama scaled --rope-scaling llama3
make_llama gelu --hidden-act gelu
expect_exit 0 'imported .*llama/model.safetensors \(layers 2 hidden 64 heads 4 ffn 128 seq 64 vocab 4096 .*rmsnorm swiglu rope 10000 gqa 2 untied no-bias' \
  import --input llama/model.safetensors --output imp
expect_refusal '^tessera: error: config.json: rope_scaling .*llama3.* \(this engine computes plain rotary positions' \
  import --input scaled/model.safetensors --output imp_scaled
expect_refusal "^tessera: error: config.json: hidden_act 'gelu'" import --input gelu/model.safetensors --output imp_gelu
[ ! -e imp_scaled/latest ] || fail "a refused import left a checkpoint"

# ---- fine-tune from the file's weights -----------------------------------------
# The zero-embedding file: every logit is 0 at step 1, so the loss is ln(4096).
expect_exit 0 'imported' import --input zero/model.safetensors --output imp_zero
expect_exit 0 'fine-tuning from .*imp_zero/step_000000 \(weights, starting at step 1' \
  train "${batch[@]}" --train-iters 1 --load imp_zero --finetune --use-checkpoint-args --metrics-file zero.jsonl
"$py" -c 'import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "\"step\"" in l]
d = abs(r[0]["loss"] - math.log(4096))
assert r[0]["step"] == 1 and d < 2e-5, (r[0], math.log(4096))
print("ok: --finetune from the zero-embedding Llama file: step 1 loss %.6f = ln(4096) to %.1e" % (r[0]["loss"], d))' zero.jsonl \
  || fail "--finetune did not start from the Llama file's weights"

expect_exit 0 '^model: layers 2 hidden 64 heads 4 ffn 128 seq 64 .*rmsnorm swiglu rope 10000 gqa 2 untied no-bias' \
  train "${batch[@]}" --train-iters 12 --load imp --finetune --use-checkpoint-args --metrics-file ft.jsonl --save ft
"$py" - ft.jsonl <<'PY' || fail "the Llama fine-tune's loss did not fall"
import json, sys
loss = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "step" in r and "loss" in r]
first, last = sum(loss[:3]) / 3, sum(loss[-3:]) / 3
assert len(loss) == 12 and last < first - 0.2, loss
print(f"ok: the Llama fine-tune's loss falls: steps 1-3 mean {first:.4f}, steps 10-12 mean {last:.4f}")
PY

# ---- export the fine-tune: Llama again, the same loss ---------------------------
expect_exit 0 'exported .* config.json \(Llama\)' export --checkpoint ft --output hf
"$py" -c 'import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
eot = json.load(open(sys.argv[1] + "/vocab.json"))["<|endoftext|>"]
want = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_key_value_heads": 2,
        "tie_word_embeddings": False, "bos_token_id": eot, "eos_token_id": eot}
bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
assert not bad, bad
print(f"ok: the export says LlamaForCausalLM, 2 kv heads, untied, bos = eos = {eot}")' hf || fail "export: config.json"
evals=(--micro-batch-size 2 --eval-iters 3 --threads 1)
"$bin" eval --checkpoint ft "${evals[@]}" --json e_ck.json > e_ck.log 2>&1 || { cat e_ck.log; fail "eval --checkpoint"; }
"$bin" eval --safetensors hf/model.safetensors "${evals[@]}" --json e_st.json > e_st.log 2>&1 ||
  { cat e_st.log; fail "eval --safetensors"; }
"$py" -c 'import json, sys
a, b = (json.load(open(p))["loss"] for p in sys.argv[1:3])
assert abs(a - b) <= 1e-6 * abs(a), (a, b)
print(f"ok: eval --safetensors of the Llama export {b:.6f} = eval --checkpoint {a:.6f}")' e_ck.json e_st.json \
  || fail "eval --safetensors of the Llama export differs from the checkpoint's"

# Every rank reads the whole file and keeps its slice: tp 2 splits the two
# kv heads one a rank and SwiGLU's gate and up rows.
if [ -x "$src/scripts/mpirun.sh" ] && command -v mpirun > /dev/null; then
  timeout 120 "$src/scripts/mpirun.sh" -n 2 "$bin" eval --safetensors hf/model.safetensors "${evals[@]}" \
    --tensor-model-parallel-size 2 --json e_tp.json > e_tp.log 2>&1 || { cat e_tp.log; fail "eval --safetensors tp 2"; }
  "$py" -c 'import json, sys
a, b = (json.load(open(p))["loss"] for p in sys.argv[1:3])
assert abs(a - b) <= 1e-5 * abs(a), (a, b)
print(f"ok: eval --safetensors of the Llama export under tp 2 {b:.6f} = one process {a:.6f}")' e_st.json e_tp.json \
    || fail "eval --safetensors of the Llama export under tp 2 differs"
else
  echo "note: no mpirun: eval under tp 2 is not checked here"
fi

finish "failure(s)"

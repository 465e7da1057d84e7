#!/usr/bin/env bash
# `tessera generate` on a Llama-family checkpoint (issue 17): a few steps of
# configs/llama-tiny.toml (RMSNorm, SwiGLU, RoPE, GQA 4/2, untied head, no
# biases; a 32-token context here so the window slides) saved, then
# generate continues a prompt with the KV cache and without it
# (--no-kv-cache): both exit 0, print the prompt and new text after it, and
# greedy decoding gives the same text either way, across the window slide.
# Usage: test_generate_llama.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
scratch_dir
cd "$tmp" || exit 1

timeout 300 "$bin" train --config "$src/configs/llama-tiny.toml" --seq-length 32 \
  --micro-batch-size 4 --global-batch-size 4 --train-iters 3 --eval-iters 1 --no-progress \
  --peak-tflops 1 --save "$tmp/run" > train.log 2>&1 ||
  { fail "train --config configs/llama-tiny.toml:"; tail -5 train.log; }

prompt="The meaning of life is"
# gen NAME ARGS...: generate greedily from the saved run into NAME.out.
gen() {
  local name=$1
  shift
  timeout 120 "$bin" generate --checkpoint "$tmp/run" --prompt "$prompt" --max-new-tokens 60 \
    --temperature 0 --ignore-eot "$@" > "$name.out" 2> "$name.err"
  local status=$?
  if [ "$status" -ne 0 ]; then
    fail "generate $* exited $status:"
    tail -3 "$name.err"
  fi
}
gen cached
gen recomputed --no-kv-cache
for f in cached recomputed; do
  head -c ${#prompt} "$f.out" | grep -qxF "$prompt" || fail "$f: stdout does not start with the prompt"
  [ "$(wc -c < "$f.out")" -gt $((${#prompt} + 1)) ] || fail "$f: no text after the prompt"
  grep -q 'stopped after --max-new-tokens 60' "$f.err" || fail "$f: did not produce 60 tokens: $(tail -1 "$f.err")"
done
cmp -s cached.out recomputed.out ||
  fail "greedy text differs with and without the KV cache: $(head -c 200 cached.out) | $(head -c 200 recomputed.out)"
echo "generated: $(head -c 160 cached.out | tr '\n' ' ')"
# Sampling runs too (top-k, a seed): the same seed, the same text.
gen sampled1 --temperature 0.8 --top-k 40 --seed 3
gen sampled2 --temperature 0.8 --top-k 40 --seed 3
cmp -s sampled1.out sampled2.out || fail "sampling with one seed is not repeatable"

finish "failure(s)" "ok: generate on a Llama-family checkpoint, with and without the KV cache"

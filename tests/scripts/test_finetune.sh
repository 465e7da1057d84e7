#!/usr/bin/env bash
# Issue 16 item 1: fine-tuning from weights, through the CLI.
# - a GPT-2 file written independently (tests/ckpt/make_safetensors.py gpt2)
#   imports; files the model cannot hold (layers it has not, an untied head)
#   are refused naming the tensors; `import --config FILE` reads that JSON;
#   an import records no seed; export's config.json names bos/eos;
# - `train --load IMPORT` says to pass --finetune; --finetune starts at step 1
#   from the file's weights (a zero-embedding file gives loss ln(V) exactly);
#   --use-checkpoint-args takes the shape (and says which flags it replaced);
# - --no-load-optim keeps step and LR with fresh moments; --no-load-rng lets
#   the seed change;
# - the same fine-tune under tp 2, ZeRO-1 dp 2 and pp 2 gives one process's losses.
# Bad input: one line, exit 2, before any step.
# Usage: test_finetune.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then echo "SKIP: needs $py with numpy"; exit 77; fi
scratch_dir
cd "$tmp" || exit 1
make_gpt2() { "$py" "$src/tests/ckpt/make_safetensors.py" gpt2 "$@" > /dev/null || exit 1; }
# The file's shape is 2 layers, hidden 64, 4 heads, 64 positions, vocabulary 4096
# (the embedded corpus's BPE).
batch=(--micro-batch-size 2 --global-batch-size 4 --no-progress --peak-tflops 1
       --attention-dropout 0 --hidden-dropout 0 --lr 1e-3 --lr-warmup-iters 0)
shape=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64)


# same_losses A B TOL WHAT: equal steps, losses within TOL relative.
same_losses() {
  "$py" - "$@" <<'PY' || fail "$4"
import json, sys
a, b, tol, what = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
rows = lambda p: [json.loads(l) for l in open(p) if '"step"' in l and '"run"' not in l]
ra, rb = rows(a), rows(b)
assert [r["step"] for r in ra] == [r["step"] for r in rb] and ra, (what, len(ra), len(rb))
worst = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(ra, rb))
print(f"{'ok' if worst <= tol else 'FAIL'}: {what}: {len(ra)} steps, worst relative loss difference {worst:.2e} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
PY
}

# ---- import: what a file may and may not hold --------------------------------
make_gpt2 gpt2 --mask-buffers
make_gpt2 deeper --extra-layer
make_gpt2 untied --untied-head
make_gpt2 tiedcopy --tied-head-copy
make_gpt2 zero --zero-head
expect_exit 0 'imported .*gpt2/model.safetensors' import --input gpt2/model.safetensors --output imp
expect_refusal "deeper/model.safetensors: 12 tensor\(s\) the model .* has no place for: transformer\.h\.2\.attn\.c_attn\.bias" \
  import --input deeper/model.safetensors --config gpt2/config.json --output imp_deeper
[ ! -e imp_deeper/latest ] || fail "a refused import left a checkpoint"
expect_refusal 'untied/model.safetensors: lm_head.weight differs from transformer.wte.weight \(an untied LM head\)' \
  import --input untied/model.safetensors --output imp_untied
expect_exit 0 'imported' import --input tiedcopy/model.safetensors --output imp_tiedcopy
# --config names a JSON config.json (it used to be read as a TOML --config).
cp gpt2/config.json elsewhere.json
mkdir -p bare && cp gpt2/model.safetensors bare/
expect_exit 0 'imported .*bare/model.safetensors' import --input bare/model.safetensors --config elsewhere.json --output imp_cfg
expect_refusal '^tessera: error: --config nope.json: .*No such file' import --input bare/model.safetensors --config nope.json --output imp_nope
"$py" -c 'import json, sys
m = json.load(open(sys.argv[1]))
assert "seed" not in m, ("an import records a seed", m.get("seed"))
assert m["extra"]["imported_from"].endswith("gpt2/model.safetensors"), m["extra"]
print("ok: the import records no seed, and where it came from")' imp/step_000000/metadata.json || fail "import metadata"

# ---- train --load of an import ----------------------------------------------
expect_refusal 'imp: checkpoint .* has no optimizer state to resume \(it is an import\): pass --finetune' \
  train "${shape[@]}" "${batch[@]}" --train-iters 2 --load imp
expect_refusal 'holds a different model \(num_layers 2 vs 1.*pass --use-checkpoint-args' \
  train --num-layers 1 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "${batch[@]}" \
  --train-iters 2 --load imp --finetune
expect_refusal '^tessera: error: --finetune needs --load DIR' train "${shape[@]}" "${batch[@]}" --finetune
expect_refusal '^tessera: error: --no-load-optim needs --load DIR' train "${shape[@]}" "${batch[@]}" --no-load-optim
expect_refusal '^tessera: error: --use-checkpoint-args needs --load DIR' train "${shape[@]}" "${batch[@]}" --use-checkpoint-args
expect_refusal 'checkpoint nowhere: no such directory' train "${shape[@]}" "${batch[@]}" --load nowhere --finetune

# --finetune from the zero-embedding file: every logit is 0 at step 1, so the
# loss is ln(4096) whatever the data; a run from tessera's own init is not.
expect_exit 0 'imported' import --input zero/model.safetensors --output imp_zero
expect_exit 0 'fine-tuning from .*imp_zero/step_000000 \(weights, starting at step 1, fresh optimizer, this run.s seed 1234\)' \
  train "${shape[@]}" "${batch[@]}" --train-iters 2 --load imp_zero --finetune --metrics-file zero.jsonl
"$py" -c 'import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "\"step\"" in l]
assert r[0]["step"] == 1, r[0]
d = abs(r[0]["loss"] - math.log(4096))
assert d < 2e-5, (r[0]["loss"], math.log(4096))
print("ok: --finetune from the zero-embedding file: step 1 loss %.6f = ln(4096) to %.1e" % (r[0]["loss"], d))' zero.jsonl \
  || fail "--finetune did not start from the file's weights"
expect_exit 0 '^step' train "${shape[@]}" "${batch[@]}" --train-iters 1 --metrics-file scratch.jsonl
"$py" -c 'import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "\"step\"" in l]
d = abs(r[0]["loss"] - math.log(4096))
assert d > 1e-3, (r[0]["loss"], "a run from its own init should not give ln(V) exactly")
print(f"ok: a run from its own init is {d:.4f} away from ln(4096)")' scratch.jsonl || fail "the zero-file check cannot tell"

# --use-checkpoint-args: no shape flags needed; a given one is replaced, and says so.
expect_exit 0 '--use-checkpoint-args: --num-layers 6 replaced by the checkpoint.s 2' \
  train --num-layers 6 "${batch[@]}" --train-iters 3 --load imp --finetune --use-checkpoint-args \
  --metrics-file ft1.jsonl --save ft1
grep -q '^model: layers 2 hidden 64 heads 4' <<<"$last_out" || fail "--use-checkpoint-args: the model line is not the checkpoint's: $(grep '^model' <<<"$last_out")"
[ "$(cat ft1/latest 2>/dev/null)" = step_000003 ] || fail "--finetune --train-iters 3 did not save step_000003"
# A fine-tune's --seq-length is its own (the 64 positions stay the file's).
expect_exit 0 '^model: layers 2 hidden 64 heads 4 ffn 256 seq 32 ' \
  train "${batch[@]}" --train-iters 1 --load imp --finetune --use-checkpoint-args --seq-length 32
expect_exit 0 '^model: layers 2 hidden 64 heads 4 ffn 256 seq 32 ' \
  train "${shape[@]}" "${batch[@]}" --seq-length 32 --max-position-embeddings 64 --train-iters 1 \
  --load imp --finetune
expect_refusal 'holds a different model \(max_position_embeddings 64 vs 32' \
  train "${shape[@]}" "${batch[@]}" --seq-length 32 --train-iters 1 --load imp --finetune
# It is a run of its own: resuming it needs no flags either (its seed is recorded now).
expect_exit 0 'resumed from .*ft1/step_000003 \(weights, step 3, optimizer state, seed 1234\)' \
  train "${batch[@]}" --train-iters 4 --load ft1 --use-checkpoint-args --save ft1 --metrics-file ft1b.jsonl

# A fine-tune restarts at step 1: not into the directory of the run it loads
# (an import's step 0 alone is fine: ft_in_imp saves beside it).
cp -r imp ft_in_imp
expect_exit 0 'saved ft_in_imp/step_000001' train "${batch[@]}" --train-iters 1 --load ft_in_imp --finetune \
  --use-checkpoint-args --save ft_in_imp
expect_refusal '^tessera: error: --save ft1 is where --finetune loads from, and it holds a run.s checkpoints \(2 steps, the newest step_000004\)' \
  train "${batch[@]}" --train-iters 1 --load ft1 --finetune --use-checkpoint-args --save ft1 --overwrite-save

# ---- --no-load-optim and --no-load-rng on a trained checkpoint ----------------
expect_exit 0 '^step' train "${shape[@]}" "${batch[@]}" --train-iters 4 --save-interval 2 --save run \
  --seed 7 --metrics-file run.jsonl
expect_exit 0 'resumed from .*step_000002 \(weights, step 2, fresh optimizer, seed 7\)' \
  train "${shape[@]}" "${batch[@]}" --train-iters 4 --seed 7 --load run/step_000002 --no-load-optim \
  --metrics-file noopt.jsonl
"$py" - run.jsonl noopt.jsonl <<'PY' || fail "--no-load-optim"
import json, sys
rows = lambda p: {r["step"]: r for r in map(json.loads, open(p)) if "step" in r}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert sorted(b) == [3, 4], sorted(b)
# Step 3 runs on the same weights and data: the same loss and LR.
assert a[3]["loss"] == b[3]["loss"] and a[3]["lr"] == b[3]["lr"], (a[3], b[3])
# Fresh moments take another step: step 4's loss moves.
assert abs(a[4]["loss"] - b[4]["loss"]) > 1e-6, (a[4]["loss"], b[4]["loss"])
print(f"ok: --no-load-optim: step 3 loss {b[3]['loss']:.6f} as the run's, step 4 {b[4]['loss']:.6f} vs {a[4]['loss']:.6f}")
PY
expect_refusal 'the checkpoint was trained with --seed 7, this run has --seed 8 .*pass --no-load-rng' \
  train "${shape[@]}" "${batch[@]}" --train-iters 4 --seed 8 --load run/step_000002
expect_exit 0 'resumed from .*\(weights, step 2, optimizer state, this run.s seed 8\)' \
  train "${shape[@]}" "${batch[@]}" --train-iters 3 --seed 8 --load run/step_000002 --no-load-rng \
  --metrics-file norng.jsonl
"$py" - run.jsonl norng.jsonl <<'PY' || fail "--no-load-rng"
import json, sys
rows = lambda p: {r["step"]: r for r in map(json.loads, open(p)) if "step" in r}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert abs(a[3]["loss"] - b[3]["loss"]) > 1e-6, "another seed draws other samples"
print(f"ok: --no-load-rng --seed 8: step 3 loss {b[3]['loss']:.6f} (the seed-7 run had {a[3]['loss']:.6f})")
PY

# ---- export names the tokenizer's <|endoftext|> --------------------------------
expect_exit 0 'exported' export --checkpoint ft1 --output hf_out
"$py" -c 'import json, sys
c = json.load(open(sys.argv[1] + "/config.json"))
eot = json.load(open(sys.argv[1] + "/vocab.json"))["<|endoftext|>"]
assert c.get("bos_token_id") == eot and c.get("eos_token_id") == eot, (c.get("bos_token_id"), eot)
print(f"ok: config.json bos_token_id = eos_token_id = {eot}")' hf_out || fail "export: bos/eos_token_id"

# ---- every layout fine-tunes alike ------------------------------------------
# Dropout on (Megatron's 0.1): its masks restart with the steps and must match too.
ft=("${batch[@]}" --global-batch-size 8 --train-iters 4 --load imp --finetune --use-checkpoint-args
    --attention-dropout 0.1 --hidden-dropout 0.1)
expect_exit 0 '^step' train "${ft[@]}" --metrics-file one.jsonl
if [ -x "$src/scripts/mpirun.sh" ] && command -v mpirun > /dev/null; then
  for layout in "--tensor-model-parallel-size 2" "--zero-stage 1" "--zero-stage 3" "--pipeline-model-parallel-size 2"; do
    name=$(tr -dc 'a-z0-9' <<<"$layout")
    # shellcheck disable=SC2086
    out=$(timeout 300 "$src/scripts/mpirun.sh" -n 2 "$bin" train "${ft[@]}" $layout --metrics-file "$name.jsonl" 2>&1) \
      || { fail "mpirun -n 2 train --finetune $layout:"; echo "$out" | tail -5; continue; }
    grep -q 'fine-tuning from' <<<"$out" || fail "$layout: no fine-tuning line"
    same_losses one.jsonl "$name.jsonl" 1e-5 "--finetune from an import, 2 ranks $layout vs one process"
  done
  # A bad --load in a job: every rank refuses before allocating; one line, exit 2.
  out=$(timeout 120 "$src/scripts/mpirun.sh" -n 2 "$bin" train "${batch[@]}" --train-iters 2 --load imp \
        --use-checkpoint-args --zero-stage 1 2>&1)
  status=$?
  n=$(grep -c 'has no optimizer state to resume (it is an import): pass --finetune' <<<"$out")
  if [ "$status" -ne 2 ] || [ "$n" -ne 1 ] || grep -q '^step ' <<<"$out"; then
    fail "mpirun -n 2 train --load IMPORT: exit $status, the refusal printed $n times (want exit 2, once):"
    echo "$out" | tail -5 | sed 's/^/    /'
  else
    echo "ok: 2 ranks: $(grep 'has no optimizer state' <<<"$out")"
  fi
else
  echo "note: no mpirun: the multi-rank fine-tune is not checked here"
fi

finish "failure(s)"

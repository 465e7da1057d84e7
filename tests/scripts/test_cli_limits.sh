#!/usr/bin/env bash
# Issue 15, defects 5 and 6: every hostile number or wrong-typed file field
# ends as one line naming the flag (or the file and field) and exit code 2
# exactly — never a signal (SIGFPE from tp 0, SIGSEGV from libgomp, SIGABRT
# from an escaped exception), a hang, or a silent run with a nonsense value.
# And a checkpoint whose newest step has a wrong-typed field still resumes
# from the previous good step.
# Usage: test_cli_limits.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
scratch_dir
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 2 --train-iters 2 --no-progress --peak-tflops 1)
plan=(plan --model gpt2-small --devices 8 --global-batch-size 8)
big=9223372036854775807   # INT64_MAX
half=4611686018427387904  # 2^62: times 4 wraps to 0

expect2() {  # expect2 PATTERN ARGS...: exit code 2 and an error line matching PATTERN
  local pattern=$1
  shift
  local out status
  out=$(timeout 60 "$bin" "$@" 2>&1)
  status=$?
  if [ "$status" -ne 2 ]; then
    fail "tessera $* exited $status (want 2):"
    echo "$out" | tail -3 | sed 's/^/    /'
  elif ! grep -Eq -- "^tessera: error: .*($pattern)" <<<"$out"; then
    fail "tessera $*: no error line matching /$pattern/:"
    echo "$out" | tail -3 | sed 's/^/    /'
  else
    echo "ok (2): $(grep -E -- "^tessera: error: " <<<"$out" | head -1)"
  fi
}

# ---- defect 6: integer and float edge cases, train --------------------------
expect2 '--tensor-model-parallel-size must be >= 1' train "${small[@]}" --tensor-model-parallel-size 0
expect2 '--pipeline-model-parallel-size must be >= 1' train "${small[@]}" --pipeline-model-parallel-size 0
expect2 '--micro-batch-size must be >= 1' train "${small[@]}" --micro-batch-size 0
# zb-h1 (issue 36): one pipeline stage has no bubble to fill.
expect2 '--pipeline-schedule zb-h1 needs --pipeline-model-parallel-size >= 2 \(got 1\)' \
  train "${small[@]}" --pipeline-schedule zb-h1
# zbv (issue 36): two chunks per rank in a V, nothing else.
expect2 '--pipeline-schedule zbv needs --virtual-pipeline-stages 2 \(got 1\)' \
  train "${small[@]}" --pipeline-schedule zbv
# pp 0 with layers per virtual stage divided num_layers by per x pp = 0 (SIGFPE).
expect2 '--pipeline-model-parallel-size must be >= 1' \
  train "${small[@]}" --pipeline-model-parallel-size 0 --num-layers-per-virtual-pipeline-stage 1
expect2 '--num-layers-per-virtual-pipeline-stage must be >= 1' \
  train "${small[@]}" --num-layers-per-virtual-pipeline-stage -1
# tp x pp = 2^64 wrapped to 0 (SIGFPE).
expect2 '--tensor-model-parallel-size x --context-parallel-size x --pipeline-model-parallel-size: size overflows' \
  train "${small[@]}" --tensor-model-parallel-size $half --pipeline-model-parallel-size 4
expect2 '--make-vocab-size-divisible-by|model size' train "${small[@]}" --make-vocab-size-divisible-by $big
expect2 '--global-batch-size x --seq-length: size overflows' \
  train "${small[@]}" --global-batch-size $big --micro-batch-size 1
expect2 '--train-iters x --global-batch-size x --seq-length: size overflows' train "${small[@]}" --train-iters $big
expect2 '--eval-iters x --micro-batch-size x --seq-length' train "${small[@]}" --eval-iters $half --eval-interval 1
expect2 '--threads must be in \[0, 1024\] \(got 100000\)' train "${small[@]}" --threads 100000
expect2 '--seed: must be >= 0 \(got -1\)' train "${small[@]}" --seed -1
expect2 '--vocab-size must be >= 2 \(got -5' train "${small[@]}" --vocab-size -5
expect2 '--lr must be a finite number \(got inf\)' train "${small[@]}" --lr inf
expect2 '--adam-eps must be a finite number \(got inf\)' train "${small[@]}" --adam-eps inf
expect2 '--weight-decay must be a finite number' train "${small[@]}" --weight-decay inf
expect2 '--clip-grad must be a finite number' train "${small[@]}" --clip-grad inf
expect2 '--peak-tflops must be a finite number' train "${small[@]}" --peak-tflops inf
expect2 '--comm-timeout must be a finite number' train "${small[@]}" --comm-timeout inf
expect2 '--init-method-std must be a finite number' train "${small[@]}" --init-method-std inf
expect2 '--num-layers must be in \[1, 65536\]' train "${small[@]}" --num-layers 100000000
expect2 'model size .*size overflows' train "${small[@]}" --ffn-hidden-size $half
expect2 'model size .*size overflows' train "${small[@]}" --max-position-embeddings $half
expect2 'model size .*size overflows' train "${small[@]}" --hidden-size $half

# Uneven pipeline stages (issue 13): zero, negative, without a pipeline, and
# the same from a --config file. (Splits that need pp > 1 ranks:
# test_mpi_errors.sh.)
first=--decoder-first-pipeline-num-layers
last=--decoder-last-pipeline-num-layers
expect2 "$first must be >= 1 \\(got 0\\)" train "${small[@]}" $first 0
expect2 "$last must be >= 1 \\(got -2\\)" train "${small[@]}" $last -2
expect2 "$first must be >= 1 \\(got -1\\)" train "${small[@]}" $first=-1
expect2 "$first needs --pipeline-model-parallel-size > 1 \\(got 1\\)" train "${small[@]}" $first 1
expect2 "$last needs --pipeline-model-parallel-size > 1 \\(got 1\\)" train "${small[@]}" $last 1
expect2 "$first.*(could not be converted|integer|valid)|Could not convert" train "${small[@]}" $first one
printf 'pipeline-model-parallel-size = 1\ndecoder-last-pipeline-num-layers = 1\n' > "$tmp/uneven.toml"
expect2 "$last needs --pipeline-model-parallel-size > 1" train "${small[@]}" --config "$tmp/uneven.toml"

# ---- defect 6: the other commands' flags ------------------------------------
expect2 '--tp must be >= 1 \(got 0\)' "${plan[@]}" --tp 0
expect2 '--pp must be >= 1 \(got 0\)' "${plan[@]}" --pp 0
expect2 '--micro-batch must be >= 1 \(got 0\)' "${plan[@]}" --micro-batch 0
expect2 '--virtual-stages must be >= 1' "${plan[@]}" --virtual-stages 0
expect2 '--zero must be 0, 1, 2 or 3' "${plan[@]}" --zero 7
# zbv is searched when asked (issue 36): its layouts name the two chunks.
out=$(timeout 60 "$bin" "${plan[@]}" --schedule zbv --pp 2 2>&1)
if [ $? -ne 0 ] || ! grep -q -- "--pipeline-schedule zbv --virtual-pipeline-stages 2" <<<"$out"; then
  fail "plan --schedule zbv: no zbv layout with --virtual-pipeline-stages 2:"
  echo "$out" | tail -3 | sed 's/^/    /'
else
  echo "ok (0): plan --schedule zbv plans"
fi
expect2 '--top must be >= 1 \(got -1\)' "${plan[@]}" --top -1
expect2 '--devices must be in \[1, 16777216\]' plan --model gpt2-small --devices $big --global-batch-size 8
expect2 '--global-batch-size must be in \[1, 16777216\]' plan --model gpt2-small --devices 8 --global-batch-size $big
expect2 '--threads must be in \[0, 1024\]' bench peak --threads 100000 --output "$tmp/peak.json"
expect2 '--threads must be in \[0, 1024\]' bench peak --threads -3 --output "$tmp/peak.json"
expect2 '--micro-batch must be in' calibrate --quick --micro-batch 0 --output "$tmp/l.toml"
expect2 '--tp must be in' calibrate --quick --tp 0 --output "$tmp/l.toml"
expect2 '--max-gflop must be a finite number' calibrate --quick --max-gflop nan --output "$tmp/l.toml"
expect2 '--threads must be in' calibrate --quick --threads 100000 --output "$tmp/l.toml"

printf 'hello world, the quick brown fox\n%.0s' {1..20} > "$tmp/text.txt"
expect2 '--min-count must be >= 1' tokenize train --input "$tmp/text.txt" --vocab-size 300 --min-count -1 --output "$tmp/tokx"
"$bin" tokenize train --input "$tmp/text.txt" --vocab-size 270 --min-count 1 --output "$tmp/tok" > /dev/null 2>&1
"$bin" tokenize encode --vocab "$tmp/tok" --input "$tmp/text.txt" --output "$tmp/x.tok" > /dev/null 2>&1
expect2 '--threads must be in' tokenize encode --vocab "$tmp/tok" --input "$tmp/text.txt" --output "$tmp/y.tok" --threads 100000
expect2 '--start must be >= 0' tokenize decode --vocab "$tmp/tok" --input "$tmp/x.tok" --start -5
expect2 '--count must be >= 0' tokenize decode --vocab "$tmp/tok" --input "$tmp/x.tok" --count -7
expect2 "--start $big is past the end" tokenize decode --vocab "$tmp/tok" --input "$tmp/x.tok" --start $big --count $big

# A checkpoint to generate from, resume from, and break.
"$bin" train "${small[@]}" --train-iters 4 --save-interval 2 --save "$tmp/ck" > "$tmp/ck.log" 2>&1 ||
  { echo "FAIL: could not train the test checkpoint"; cat "$tmp/ck.log"; exit 1; }
expect2 '--seed: must be >= 0' generate --checkpoint "$tmp/ck" --seed -1
expect2 '--temperature must be a finite number' generate --checkpoint "$tmp/ck" --temperature inf

# ---- defect 5: sizes bounded before allocating ------------------------------
expect2 'needs at least [0-9.]+ GB per rank .* GB are available' \
  train "${small[@]}" --hidden-size 1000000 --num-attention-heads 2

# ---- defect 5: wrong-typed JSON fields name the file and field ---------------
# set_json FILE_IN FILE_OUT PATH JSON_VALUE: PATH like run/parallel/tp (on line 1)
set_json() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
src, dst, path, value = sys.argv[1:]
text = open(src).read()
try:  # a JSON document, or JSON lines (then the first line is edited)
    doc, lines = json.loads(text), [text]
except ValueError:
    lines = text.splitlines()
    doc = json.loads(lines[0])
node = doc
keys = path.split("/")
for k in keys[:-1]:
    node = node[int(k)] if isinstance(node, list) else node[k]
node[keys[-1]] = json.loads(value)
if len(lines) == 1:
    open(dst, "w").write(json.dumps(doc, indent=1))
else:
    open(dst, "w").write("\n".join([json.dumps(doc)] + lines[1:]) + "\n")
PY
}
"$bin" train "${small[@]}" --metrics-file "$tmp/m.jsonl" > /dev/null 2>&1
set_json "$tmp/m.jsonl" "$tmp/bad.jsonl" run/parallel/tp '"2"'
expect2 "$tmp/bad.jsonl:1: parallel config: 'tp' must be an integer" plan --validate "$tmp/bad.jsonl" --system frontier
set_json "$tmp/m.jsonl" "$tmp/bad.jsonl" run/threads '"x"'
expect2 "$tmp/bad.jsonl:1: the run header's \"threads\" must be an integer" plan --validate "$tmp/bad.jsonl" --system frontier
set_json "$tmp/m.jsonl" "$tmp/bad.jsonl" run/model/init_std '"x"'
expect2 "$tmp/bad.jsonl:1: model config: 'init_std' must be a number" plan --validate "$tmp/bad.jsonl" --system frontier

"$bin" export --checkpoint "$tmp/ck" --output "$tmp/hf" > /dev/null 2>&1
mkdir -p "$tmp/hf_bad"
cp "$tmp/hf/model.safetensors" "$tmp/hf_bad/"
set_json "$tmp/hf/config.json" "$tmp/hf_bad/config.json" activation_function 5
expect2 "config.json: 'activation_function' has the wrong type" \
  import --input "$tmp/hf_bad/model.safetensors" --output "$tmp/imported"
set_json "$tmp/hf/config.json" "$tmp/hf_bad/config.json" layer_norm_epsilon '"x"'
expect2 "config.json: 'layer_norm_epsilon' has the wrong type" \
  import --input "$tmp/hf_bad/model.safetensors" --output "$tmp/imported"

printf '{"fp32_gemm_tflops": 1.0, "threads": "x"}' > "$tmp/peak_bad.json"
expect2 "peak file $tmp/peak_bad.json is not a valid" train "${small[@]}" --peak-tflops 0 --peak-file "$tmp/peak_bad.json"

# The newest checkpoint's metadata.json with a wrong-typed field (CRC
# re-signed, as anyone can): a fallback to the previous good step, exit 0.
resign() {  # resign STEP_DIR: a fresh metadata.crc32c for metadata.json
  /usr/bin/python3 - "$1" <<'PY'
import sys
t = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    t.append(c)
c = 0xFFFFFFFF
for b in open(sys.argv[1] + "/metadata.json", "rb").read():
    c = t[(c ^ b) & 0xFF] ^ (c >> 8)
open(sys.argv[1] + "/metadata.crc32c", "w").write("0x%08x\n" % (c ^ 0xFFFFFFFF))
PY
}
for field in model/ffn_hidden_size parallel/tp parallel/sequence_parallel parallel step; do
  rm -rf "$tmp/ck2" && cp -r "$tmp/ck" "$tmp/ck2"
  md="$tmp/ck2/step_000004/metadata.json"
  set_json "$md" "$md" "$field" '"x"'
  resign "$tmp/ck2/step_000004"
  out=$(timeout 60 "$bin" train "${small[@]}" --train-iters 6 --load "$tmp/ck2" 2>&1)
  status=$?
  if [ "$status" -ne 0 ] || ! grep -q "using the previous good checkpoint .*step_000002" <<<"$out"; then
    fail "--load with a wrong-typed $field in the newest step exited $status, want 0 from step 2:"
    echo "$out" | grep -E "note|error" | head -4 | sed 's/^/    /'
  else
    echo "ok (0): wrong-typed $field: $(grep -o "step_000004 is unusable: .*" <<<"$out" | head -1 | cut -c1-150)"
  fi
done

finish "case(s) failed" "every hostile number and wrong-typed field: one line, exit 2"

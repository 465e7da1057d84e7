#!/usr/bin/env bash
# Issue 38, classes 3, 4 and 7 (the input half), through the CLI:
# - every numeric field of a system file is range-checked where it is read:
#   tile_m = 0 (SIGFPE before), memory_GB = nan, a bandwidth of 0 or -1,
#   latency inf, a peak of 0, max_efficiency 0, a negative network
#   efficiency: each one line naming the file and the key, exit 2;
# - a model file's floats are finite and positive;
# - a dotted key of ~50,000 parts (a stack overflow, exit 139, before) is
#   refused in train --config, plan --config and a system file;
# - an error line quotes at most a few thousand bytes of a 10 MB value.
# Usage: test_reliability_inputs.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$(realpath "$1")
src=$(realpath "$2")
scratch_dir
cd "$tmp" || exit 1
expect2() { expect_refusal "$@"; }

plan_args=(--model gpt2-small --devices 8 --global-batch-size 8)
# A system file of its own (configs/systems/ may change): every key below.
cat > base.toml <<'EOF'
name = "base"
[device]
memory_GB = 80.0
memory_bandwidth_GBps = 3350.0
memory_efficiency = 0.85
peak_TFLOPs = { fp16 = 989.0, bf16 = 989.0, fp32 = 67.0 }
[node]
devices = 8
[gemm]
max_efficiency = 0.83
tile_m = 256
tile_n = 128
[[network]]
name = "nvlink"
ranks = 8
bandwidth_GBps = 450.0
latency_us = 3.4
efficiency = 0.82
[[network]]
name = "ib"
ranks = 0
bandwidth_GBps = 400.0
latency_us = 14.0
efficiency = 0.94
EOF
base=base.toml
out=$(timeout 60 "$bin" plan --system base.toml --model gpt2-small --devices 8 --global-batch-size 8 2>&1) ||
  fail "the unchanged system file does not plan: $(tail -1 <<<"$out")"
# mutate NAME SED-EXPRESSION: a copy of the H100 file with one change.
mutate() { sed -E "$2" "$base" > "$1.toml"; }

mutate tile0 's/^tile_m = .*/tile_m = 0/'
expect2 "tile0.toml: 'gemm.tile_m' must be a finite number > 0" plan --system tile0.toml "${plan_args[@]}"
mutate tilefrac 's/^tile_n = .*/tile_n = 2.5/'
expect2 "tilefrac.toml: 'gemm.tile_n' must be a whole number" plan --system tilefrac.toml "${plan_args[@]}"
mutate memnan 's/^memory_GB = .*/memory_GB = nan/'
expect2 "memnan.toml: 'device.memory_GB' must be a finite number > 0 \(got nan\)" \
  plan --system memnan.toml "${plan_args[@]}"
mutate bw0 's/^memory_bandwidth_GBps = .*/memory_bandwidth_GBps = 0/'
expect2 "bw0.toml: 'device.memory_bandwidth_GBps' must be a finite number > 0" plan --system bw0.toml "${plan_args[@]}"
mutate netbw '0,/^bandwidth_GBps = .*/s//bandwidth_GBps = -1/'
expect2 "netbw.toml: 'network\[0\].bandwidth_GBps' must be a finite number > 0 \(got -1\)" \
  plan --system netbw.toml "${plan_args[@]}"
mutate lat '0,/^latency_us = .*/s//latency_us = inf/'
expect2 "lat.toml: 'network\[0\].latency_us' must be a finite number >= 0 \(got inf\)" \
  plan --system lat.toml "${plan_args[@]}"
mutate peak0 's/^peak_TFLOPs = .*/peak_TFLOPs = { bf16 = 0, fp16 = 0, fp32 = 0 }/'
expect2 "peak0.toml: 'device.peak_TFLOPs.fp16' must be a finite number > 0" plan --system peak0.toml "${plan_args[@]}"
mutate eff0 's/^max_efficiency = .*/max_efficiency = 0/'
expect2 "eff0.toml: 'gemm.max_efficiency' must be a finite number in \(0, 1\]" plan --system eff0.toml "${plan_args[@]}"
mutate neteff '0,/^efficiency = .*/s//efficiency = -0.5/'
expect2 "neteff.toml: 'network\[0\].efficiency' must be a finite number in \(0, 1\]" \
  plan --system neteff.toml "${plan_args[@]}"
mutate devs 's/^devices = .*/devices = "eight"/'
expect2 "devs.toml: 'node.devices' must be a number" plan --system devs.toml "${plan_args[@]}"
for f in tile0 memnan bw0 netbw lat peak0 eff0 neteff; do
  grep -q = "$f.toml" && ! cmp -s "$f.toml" "$base" || fail "mutate $f changed nothing"
done

# Model files: floats finite and positive.
printf 'num-layers = 2\nhidden-size = 64\nnum-attention-heads = 2\nseq-length = 32\nmax-position-embeddings = 32\nnormalization = "RMSNorm"\nnorm-epsilon = %s\n' \
  1e300 > eps.toml
expect2 "eps.toml: key 'norm-epsilon' must be a finite number > 0" plan --system h100 --model eps.toml --devices 8 --global-batch-size 8
sed -i 's/^norm-epsilon = .*/norm-epsilon = -1e-5/' eps.toml
expect2 "eps.toml: key 'norm-epsilon' must be a finite number > 0" plan --system h100 --model eps.toml --devices 8 --global-batch-size 8

# A dotted key of 50,000 parts: refused, never a crash.
python3 -c "print('a.' * 50000 + 'a = 1')" > deep.toml
expect2 "deep.toml: line 1: a dotted key of more than 64 parts" train --config deep.toml
expect2 "deep.toml: line 1: a dotted key of more than 64 parts" plan --config deep.toml --system h100 --devices 8
expect2 "deep.toml: line 1: a dotted key of more than 64 parts" plan --system deep.toml "${plan_args[@]}"
expect2 "deep.toml: line 1: a dotted key of more than 64 parts" plan --system h100 --model deep.toml --devices 8
python3 -c "print('[' + 'b.' * 50000 + 'b]')" > deephdr.toml
expect2 "deephdr.toml: line 1: a dotted key of more than 64 parts" train --config deephdr.toml
# Dots inside strings and comments are not keys: a long dotted string value is fine to read.
python3 -c "print('# ' + 'x.' * 1000); print('save = \"' + 'd.' * 1000 + '\"')" > dots_in_strings.toml
out=$(timeout 60 "$bin" train --config dots_in_strings.toml --dry-run 2>&1)
grep -q "dotted key" <<<"$out" && fail "dots in a string or a comment counted as key parts" ||
  echo "ok: dots inside strings and comments are not counted"

# A 10 MB value quoted in an error: the line stays short.
python3 -c "print('normalization = \"' + 'x' * 10000000 + '\"')" > huge.toml
out=$(timeout 60 "$bin" plan --system h100 --model huge.toml --devices 8 --global-batch-size 8 2>&1)
status=$?
bytes=$(wc -c <<<"$out")
[ "$status" -eq 2 ] && [ "$bytes" -lt 3000 ] && grep -q "bytes cut" <<<"$out" &&
  echo "ok: a 10 MB value gives a $bytes-byte error" || fail "huge value: exit $status, $bytes bytes"

# Numbers that overflow: shares summing to inf, a count beyond int64.
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 2 --train-iters 1 --no-progress)
expect2 "--split: the shares of '1e308,1e308,1' sum past the largest number" train "${small[@]}" --split 1e308,1e308,1
out=$("$bin" generate --checkpoint nowhere --prompt hi --max-new-tokens 99999999999999999999 2>&1)
status=$?  # a CLI11 parse error: its line and the --help hint
[ "$status" -eq 2 ] && grep -q -- "--max-new-tokens: does not fit a 64-bit integer" <<<"$out" &&
  echo "ok: $(head -1 <<<"$out")" || fail "--max-new-tokens beyond int64: exit $status: $(head -1 <<<"$out")"

finish "failure(s)" "all passed"

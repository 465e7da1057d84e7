#!/usr/bin/env bash
# Honest MFU (issue 16, item 4): MFU divides by a stated peak (--peak-tflops)
# or the CPU's theoretical peak (cores x clock x FLOPs per cycle), never by
# the measured GEMM rate; the share of the measured GEMM peak (`tessera
# bench peak`'s file) is a separate figure. Checked on the metrics file of
# a tiny run: mfu = tflops_per_rank / peak_tflops, of_gemm_peak =
# tflops_per_rank / the file's rate, and the log says where each came from.
# Usage: test_mfu.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"fp32_gemm_tflops": 0.0005, "threads": 1}' >"$tmp/peak.json"
small=(--num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16
       --micro-batch-size 2 --global-batch-size 4 --train-iters 3 --no-progress --threads 1
       --cache-dir "$tmp/cache" --peak-file "$tmp/peak.json")
"$bin" train "${small[@]}" --metrics-file "$tmp/t.jsonl" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
grep -q "^peak for MFU: .* TFLOP/s per rank, theoretical: 1 core(s) x .* GHz .* FLOP/cycle" "$tmp/log" ||
  { cat "$tmp/log"; echo "FAIL: no theoretical peak line"; exit 1; }
grep -q "^measured GEMM peak: 0.001 TFLOP/s per rank, measured by .*peak.json" "$tmp/log" ||
  { cat "$tmp/log"; echo "FAIL: no measured GEMM peak line"; exit 1; }
grep -q "% of measured GEMM peak" "$tmp/log" || { echo "FAIL: no GEMM share in the step lines"; exit 1; }
"$bin" train "${small[@]}" --peak-tflops 2 --metrics-file "$tmp/s.jsonl" >"$tmp/log2" 2>&1 ||
  { cat "$tmp/log2"; exit 1; }
grep -q "^peak for MFU: 2.000 TFLOP/s per rank, stated by --peak-tflops" "$tmp/log2" ||
  { cat "$tmp/log2"; echo "FAIL: --peak-tflops not the MFU peak"; exit 1; }
python3 - "$tmp/t.jsonl" "$tmp/s.jsonl" <<'PY'
import json, sys
def steps(path):
    return [json.loads(l) for l in open(path) if '"step"' in l]
for r in steps(sys.argv[1]):
    assert r["peak_tflops"] != 0.0005 and r["peak_tflops"] > 0.001, r["peak_tflops"]
    assert abs(r["mfu"] - r["tflops_per_rank"] / r["peak_tflops"]) <= 1e-9 * r["mfu"], r
    assert abs(r["of_gemm_peak"] - r["tflops_per_rank"] / 0.0005) <= 1e-9 * r["of_gemm_peak"], r
    assert r["gemm_peak_tflops"] == 0.0005
    assert r["mfu"] < 1, r["mfu"]
for r in steps(sys.argv[2]):
    assert r["peak_tflops"] == 2 and abs(r["mfu"] - r["tflops_per_rank"] / 2) <= 1e-9 * r["mfu"], r
print("ok: MFU against the theoretical / stated peak, the measured GEMM share beside it")
PY

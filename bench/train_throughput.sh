#!/usr/bin/env bash
# Training throughput, tessera vs PyTorch, measured in the same run: the
# engine's bench_train_step and ../shared/peers/torch_gpt2_bench.py (Debian's
# /usr/bin/python3 with python3-torch, at its best: OMP_WAIT_POLICY=PASSIVE)
# on the same shapes, one after the other, then the ratio.
# Usage: bench/train_throughput.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
peer=$root/../shared/peers/torch_gpt2_bench.py
# Debian's torch runs its fp32 GEMMs on the system BLAS; with only the
# reference BLAS it is ~25x slower and the ratio means nothing. OpenBLAS
# (pthread build) replaces it through the alternatives system.
if [ -f "$peer" ] && ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null |
    grep -q "install ok installed"; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libopenblas0-pthread >/dev/null
fi
shapes=("12 768 12 gpt2-124M" "6 384 6 small")
declare -A ours theirs
for shape in "${shapes[@]}"; do
  read -r L C NH name <<<"$shape"
  echo "=== $name (L $L, C $C, NH $NH, B 4, T 64, fp32, 2 threads)"
  "$build/bench/bench_train_step" --L "$L" --C "$C" --NH "$NH" --B 4 --T 64 --steps 8 | tee /tmp/tessera_bench.$$
  ours[$name]=$(grep '^RESULT' /tmp/tessera_bench.$$ | sed 's/.*tok_per_s=//')
  if [ -f "$peer" ]; then
    /usr/bin/python3 "$peer" --L "$L" --C "$C" --NH "$NH" --B 4 --T 64 --steps 8 | tee /tmp/tessera_bench.$$
    # A ratio counts only against the peer on OpenBLAS (its RESULT line says which BLAS).
    if grep '^RESULT' /tmp/tessera_bench.$$ | grep -q 'blas=openblas'; then
      theirs[$name]=$(grep '^RESULT' /tmp/tessera_bench.$$ | grep -o 'tok[_a-z]*=[0-9.]*' | head -1 | cut -d= -f2)
    else
      echo "peer did not run on OpenBLAS: no ratio for $name"
    fi
  fi
done
rm -f /tmp/tessera_bench.$$
echo
echo "shape        tessera tok/s   pytorch tok/s   ratio"
for shape in "${shapes[@]}"; do
  read -r _ _ _ name <<<"$shape"
  t=${theirs[$name]:-}
  if [ -n "$t" ]; then
    printf "%-12s %13.1f %15.1f %7.2fx\n" "$name" "${ours[$name]}" "$t" "$(echo "${ours[$name]} / $t" | bc -l)"
  else
    printf "%-12s %13.1f %15s\n" "$name" "${ours[$name]}" "(no peer / not OpenBLAS)"
  fi
done

#!/usr/bin/env bash
# Training throughput, tessera vs PyTorch, measured in the same run: the
# engine's bench_train_step in fp32, bf16 and fp16 and
# ../shared/peers/torch_gpt2_bench.py (Debian's /usr/bin/python3 with
# python3-torch, at its best: OMP_WAIT_POLICY=PASSIVE) in fp32 and with bf16
# autocast (--bf16), on the same shapes, one after the other, then the ratios
# against issue 12's targets: tessera bf16 >= 2.5x PyTorch's bf16 autocast
# and >= 1.6x tessera's own fp32.
# Usage: [PAIRS=5] [TINY=1] bench/train_throughput.sh [BUILD_DIR] [SHAPES]
#   BUILD_DIR: default build; SHAPES: all (default) or a comma list of
#   gpt2-124M, small.
#   TINY=1 (CI, tests/bench): one tiny shape (2 layers of 64, B 1, T 16, 2
#   steps), one pair, no PyTorch peer: seconds, so a change that breaks the
#   bench fails the suite. The peer is left out there because its LM head is
#   GPT-2's (V 50257) whatever the shape, ~20 s a run on Debian's reference
#   BLAS, and it lives outside the repository (../shared/peers).
# The machine load (uptime) is printed before and after: on a shared
# machine the figures are only as good as the load was steady.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
want=${2:-all}
peer=$root/../shared/peers/torch_gpt2_bench.py
tiny=${TINY:-0}
[ "$tiny" = 1 ] && peer=/nonexistent/peer  # left out in tiny mode (see above)
B=4 T=64 steps=8
[ "$tiny" = 1 ] && { B=1; T=16; steps=2; }
# Debian's torch runs its fp32 GEMMs on the system BLAS; with only the
# reference BLAS it is ~25x slower and the ratio means nothing. OpenBLAS
# (pthread build) replaces it through the alternatives system.
if [ -f "$peer" ] && ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null |
    grep -q "install ok installed"; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libopenblas0-pthread >/dev/null
fi
shapes=()
all_shapes=("12 768 12 gpt2-124M" "6 384 6 small")
[ "$tiny" = 1 ] && all_shapes=("2 64 2 tiny")
for shape in "${all_shapes[@]}"; do
  read -r _ _ _ name <<<"$shape"
  if [ "$want" = all ] || [[ ",$want," == *",$name,"* ]]; then shapes+=("$shape"); fi
done
[ ${#shapes[@]} -gt 0 ] || { echo "train_throughput.sh: unknown SHAPES '$want'" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
declare -A tok  # tok[name/run]: tokens/s; run is fp32, bf16, fp16, torch-fp32, torch-bf16

# tessera NAME PRECISION L C NH
tessera() {
  echo "--- tessera $2"
  "$build/bench/bench_train_step" --L "$3" --C "$4" --NH "$5" --B $B --T $T --steps $steps \
    --precision "$2" | tee "$out"
  tok[$1/$2]=$(grep '^RESULT' "$out" | sed 's/.*tok_per_s=//')
}
# torch NAME fp32|bf16 L C NH: counts only on OpenBLAS (its RESULT line says which BLAS).
torch() {
  [ -f "$peer" ] || return 0
  echo "--- pytorch $2"
  local flag=()
  [ "$2" = bf16 ] && flag=(--bf16)
  /usr/bin/python3 "$peer" --L "$3" --C "$4" --NH "$5" --B $B --T $T --steps $steps "${flag[@]}" | tee "$out"
  if grep '^RESULT' "$out" | grep -q 'blas=openblas'; then
    tok[$1/torch-$2]=$(grep '^RESULT' "$out" | grep -o 'tok_per_s=[0-9.]*' | cut -d= -f2)
  else
    echo "peer did not run on OpenBLAS: no ratio against pytorch $2 for $1"
  fi
}

echo "load before: $(uptime)"
for shape in "${shapes[@]}"; do
  read -r L C NH name <<<"$shape"
  echo "=== $name (L $L, C $C, NH $NH, B $B, T $T, 2 threads)"
  # Interleaved, so that a change in the machine's load hits both engines.
  tessera "$name" fp32 "$L" "$C" "$NH"
  torch "$name" fp32 "$L" "$C" "$NH"
  tessera "$name" bf16 "$L" "$C" "$NH"
  torch "$name" bf16 "$L" "$C" "$NH"
  tessera "$name" fp16 "$L" "$C" "$NH"
done
echo "load after: $(uptime)"

# ratio A B: A / B to two decimals, or "-" when either is missing.
ratio() {
  if [ -n "${1:-}" ] && [ -n "${2:-}" ]; then printf "%.2fx" "$(echo "$1 / $2" | bc -l)"; else echo "-"; fi
}
echo
echo "tokens/s (pytorch only on OpenBLAS; '-': not run or not OpenBLAS)"
printf "%-11s %9s %9s %9s %11s %11s\n" shape fp32 bf16 fp16 torch-fp32 torch-bf16
for shape in "${shapes[@]}"; do
  read -r _ _ _ name <<<"$shape"
  printf "%-11s %9s %9s %9s %11s %11s\n" "$name" "${tok[$name/fp32]:--}" "${tok[$name/bf16]:--}" \
    "${tok[$name/fp16]:--}" "${tok[$name/torch-fp32]:--}" "${tok[$name/torch-bf16]:--}"
done
echo
echo "ratios (issue 12 targets: bf16 / torch-bf16 >= 2.5x, bf16 / own fp32 >= 1.6x)"
printf "%-11s %16s %16s %16s %16s\n" shape "bf16/torch-bf16" "bf16/own-fp32" "fp32/torch-fp32" \
  "fp16/own-fp32"
for shape in "${shapes[@]}"; do
  read -r _ _ _ name <<<"$shape"
  a=$(ratio "${tok[$name/bf16]:-}" "${tok[$name/torch-bf16]:-}")
  b=$(ratio "${tok[$name/bf16]:-}" "${tok[$name/fp32]:-}")
  c=$(ratio "${tok[$name/fp32]:-}" "${tok[$name/torch-fp32]:-}")
  d=$(ratio "${tok[$name/fp16]:-}" "${tok[$name/fp32]:-}")
  printf "%-11s %10s (2.5) %10s (1.6) %16s %16s\n" "$name" "$a" "$b" "$c" "$d"
done

# The bf16 / fp32 ratio again, as PAIRS (default 5) back-to-back fp32-then-
# bf16 pairs per shape: one pair's ratio moves by +-10 % on this shared
# machine (the same code measured 1.56x and 1.83x in two runs of this
# script), so the median of the pairs is the figure to quote.
pairs=${PAIRS:-$([ "$tiny" = 1 ] && echo 1 || echo 5)}
if [ "$pairs" -gt 0 ]; then
  echo
  echo "bf16 / own fp32 over $pairs back-to-back pairs (median is the figure)"
  for shape in "${shapes[@]}"; do
    read -r L C NH name <<<"$shape"
    ratios=()
    for ((i = 1; i <= pairs; i++)); do
      r32=$("$build/bench/bench_train_step" --L "$L" --C "$C" --NH "$NH" --B $B --T $T --steps $steps \
        --precision fp32 | grep '^RESULT' | sed 's/.*tok_per_s=//')
      r16=$("$build/bench/bench_train_step" --L "$L" --C "$C" --NH "$NH" --B $B --T $T --steps $steps \
        --precision bf16 | grep '^RESULT' | sed 's/.*tok_per_s=//')
      ratios+=("$(echo "$r16 / $r32" | bc -l)")
      printf "%-11s pair %d: fp32 %s, bf16 %s tokens/s -> %s\n" "$name" "$i" "$r32" "$r16" \
        "$(ratio "$r16" "$r32")"
    done
    median=$(printf "%s\n" "${ratios[@]}" | sort -g | sed -n "$(((pairs + 1) / 2))p")
    printf "%-11s median bf16/own-fp32 %.2fx (target 1.6x)\n" "$name" "$median"
  done
  echo "load at the end: $(uptime)"
fi

#!/usr/bin/env bash
# The main job: installs what is missing, builds, measures this machine's
# GEMM peak once (for MFU), trains the default small GPT on the embedded
# fortunes corpus, and prints a sample from the model it just trained.
# Extra arguments go to `tessera train` (e.g. --train-iters 50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
peak_file=${TESSERA_PEAK_FILE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/peak.json}
[ -f "$peak_file" ] || build/tessera bench peak
mkdir -p runs
# A fresh run each time: --overwrite-save replaces the previous run's
# checkpoints (without it tessera refuses a --save directory holding them).
build/tessera train --config configs/default.toml --save runs/default --save-keep 2 \
  --overwrite-save --metrics-file runs/default-metrics.jsonl "$@"
echo
echo "--- a sample from the model just trained ---"
build/tessera generate --checkpoint runs/default --prompt "The meaning of life is" \
  --max-new-tokens 120 --temperature 0.8 --top-k 40 --seed 1
echo

#!/usr/bin/env bash
# Mixture of experts under data and pipeline parallelism (docs/moe.md): the
# experts live in the flat parameter layout, so DP 2 (ZeRO 0 and 3) and PP 2
# train a tiny MoE (4 experts, top-2, aux and z-loss, a capacity factor that
# drops tokens) to the single process's losses and gradient norms: step 1
# within 1e-5 relative, every step to 10 within 1e-4 (norms 1e-3: the
# layouts' tolerance).
# Usage: test_moe_layouts.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
mpirun=$src/scripts/mpirun.sh
command -v mpirun > /dev/null || { echo "skip: no mpirun"; exit 77; }
scratch_dir
source "$(dirname "${BASH_SOURCE[0]}")/moe_runs.sh"  # model, run, compare
model+=(--train-iters 10)
run one 1
run dp2 2
run dp2_zero3 2 --zero-stage 3
run pp2 2 --pipeline-model-parallel-size 2
for name in dp2 dp2_zero3 pp2; do compare "$tmp/one.jsonl" "$tmp/$name.jsonl" "$name" 2; done
finish "MoE layout(s) differ from one process" "MoE under DP 2, DP 2 ZeRO-3 and PP 2 equals one process"

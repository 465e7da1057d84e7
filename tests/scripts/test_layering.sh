#!/usr/bin/env bash
# The layers of src/tessera (docs/architecture.md): a file may include its own
# folder and the folders below it, never one above or beside it. The build
# enforces this too (each layer sees only its dependencies' include roots);
# this test says which include broke the rule, in words.
# Usage: test_layering.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
src=$2/src/tessera

# layer -> the layers it may include (its own is always allowed).
declare -A allowed=(
  [core]=""
  [config]="core"
  [kernels]="core"
  [comm]="core config"
  [data]="core"
  [model]="core config kernels comm"
  [optim]="core config kernels comm model"
  [parallel]="core config kernels comm model optim"
  [ckpt]="core config kernels comm model optim parallel"
  [train]="core config kernels comm data model optim parallel ckpt"
  [plan]="core config kernels comm model optim parallel"
  [cli]="core config kernels comm data model optim parallel ckpt train plan"
)

failures=0
for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if [ -z "${allowed[$layer]+set}" ]; then
    echo "FAIL: src/tessera/$layer is not in the layer table (tests/scripts/test_layering.sh, docs/architecture.md)"
    failures=$((failures + 1))
    continue
  fi
  while IFS=: read -r file line target; do
    [ "$target" = "$layer" ] && continue
    case " ${allowed[$layer]} " in
      *" $target "*) ;;
      *) echo "FAIL: ${file#"$2"/}:$line: layer '$layer' includes tessera/$target/ (allowed: ${allowed[$layer]:-none})"
         failures=$((failures + 1)) ;;
    esac
  done < <(grep -rnoE '#include "tessera/[a-z_]+/' "$dir" | sed -E 's|#include "tessera/([a-z_]+)/|\1|')
done

# oneDNN is the CPU backend's library: only kernels/ may include it (the
# GEMM-rate measurement is kernels/gemm_peak.h). Its header sits in
# /usr/include on some machines, where the build cannot hide it.
while IFS=: read -r file line _; do
  echo "FAIL: ${file#"$2"/}:$line: includes oneDNN outside kernels/ (use kernels/gemm_peak.h or a kernel)"
  failures=$((failures + 1))
done < <(grep -rnE '#include [<"](oneapi/dnnl/)?dnnl' "$src" --include='*.h' --include='*.cpp' | grep -v "^$src/kernels/")

if [ "$failures" -ne 0 ]; then
  echo "$failures include(s) break the layering"
  exit 1
fi
echo "layering: every include of src/tessera follows the layer table"

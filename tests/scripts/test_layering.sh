#!/usr/bin/env bash
# The layers of src/tessera (docs/architecture.md): a file may include its own
# folder and the folders below it, never one above or beside it. The build
# enforces this too (each layer sees only its dependencies' include roots);
# this test says which include broke the rule, in words.
# Usage: test_layering.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
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
  [bridge]="core config kernels comm data model optim parallel ckpt train plan"
  [tune]="core config kernels comm data model optim parallel ckpt train plan bridge"
  [cli]="core config kernels comm data model optim parallel ckpt train plan bridge tune"
)

for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if [ -z "${allowed[$layer]+set}" ]; then
    fail "src/tessera/$layer is not in the layer table (tests/scripts/test_layering.sh, docs/architecture.md)"
    continue
  fi
  while IFS=: read -r file line target; do
    [ "$target" = "$layer" ] && continue
    case " ${allowed[$layer]} " in
      *" $target "*) ;;
      *) fail "${file#"$2"/}:$line: layer '$layer' includes tessera/$target/ (allowed: ${allowed[$layer]:-none})" ;;
    esac
  done < <(grep -rnoE '#include "tessera/[a-z_]+/' "$dir" | sed -E 's|#include "tessera/([a-z_]+)/|\1|')
done

# oneDNN is the CPU backend's library: only kernels/ may include it (the
# GEMM-rate measurement is kernels/gemm_peak.h). Its header sits in
# /usr/include on some machines, where the build cannot hide it.
while IFS=: read -r file line _; do
  fail "${file#"$2"/}:$line: includes oneDNN outside kernels/ (use kernels/gemm_peak.h or a kernel)"
done < <(grep -rnE '#include [<"](oneapi/dnnl/)?dnnl' "$src" --include='*.h' --include='*.cpp' | grep -v "^$src/kernels/")

# The kernel seam: outside kernels/ the CPU kernels are reached through
# kernels::Backend (kernels/backend.h, kernels/ops.h) and
# kernels/cpu_backend_info.h, never kernels/cpu/ itself.
while IFS=: read -r file line _; do
  fail "${file#"$2"/}:$line: includes kernels/cpu/ outside kernels/ (use kernels/ops.h or kernels/cpu_backend_info.h)"
done < <(grep -rnE '#include "tessera/kernels/cpu/' "$src" --include='*.h' --include='*.cpp' | grep -v "^$src/kernels/")

finish "include(s) break the layering" "layering: every include of src/tessera follows the layer table"

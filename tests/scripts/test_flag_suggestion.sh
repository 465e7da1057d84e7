#!/usr/bin/env bash
# A mistyped flag gets "did you mean" with the closest flag of the command
# (issue 16, item 5), exit 2; a word far from every flag gets no guess.
# Usage: test_flag_suggestion.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
expect() {  # expect PATTERN ARGS...: exit 2 and PATTERN in the message
  local pattern=$1 out status
  shift
  out=$("$bin" "$@" 2>&1)
  status=$?
  if [ "$status" -ne 2 ] || ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "tessera $* (exit $status): $out"
  else
    echo "ok: $(head -1 <<<"$out")"
  fi
}
expect "did you mean --lr for --lrr, --num-layers for --num-layer\\?" train --lrr 1e-3 --num-layer 2
expect "did you mean --model for --modle\\?" plan --modle gpt2-small
expect "did you mean --global-batch-size for --global-batch-sise\\?" plan --global-batch-sise 8
out=$("$bin" train --zzzzzzzz 1 2>&1)
if grep -q "did you mean" <<<"$out"; then
  fail "a guess for a word far from every flag: $out"
fi
[ "$failures" -eq 0 ]

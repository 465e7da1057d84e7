#!/usr/bin/env bash
# The planner commands the README and docs/planner.md show must work as
# written (issue 13: `plan --model 175B` was an unknown preset for a while):
# every one-line `tessera plan` example that needs no file of the reader's
# (no "...", no --validate, no continuation) runs and exits 0, and a
# search's report stays within 100 columns; so does every `tessera train
# ... --dry-run` example (run in document order after the plan that may
# write its --config; paths under /tmp/ go to a private directory).
# Usage: test_readme_plan_commands.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
count=0
scratch_dir
while IFS= read -r line; do
  cmd=${line%%#*}  # drop the trailing comment
  cmd=${cmd//\/tmp\//$tmp/}
  sub=$(sed -E 's/^(build\/)?tessera (plan|train) .*/\2/' <<<"$cmd")
  args=${cmd#*tessera "$sub"}
  count=$((count + 1))
  # shellcheck disable=SC2086  # the example's words, split as a shell would
  if out=$(cd "$src" && timeout 120 "$bin" "$sub" $args 2>&1); then
    echo "ok: tessera $sub$args"
    # A search's report fits a 100-column terminal (issue 13, part 4).
    long=$(awk 'length($0) > 100' <<<"$out")
    if [[ "$args" == *--model* || "$args" == *--config* ]] && [ -n "$long" ]; then
      fail "tessera $sub$args prints lines over 100 columns:"
      echo "$long" | head -3 | sed 's/^/    /'
    fi
  else
    fail "tessera $sub$args"
    echo "$out" | tail -3 | sed 's/^/    /'
  fi
done < <(grep -hE '^(build/)?tessera (plan |train .*--dry-run)' "$src/README.md" "$src/docs/planner.md" |
         grep -vE '\.\.\.|--validate|\\$')
if [ "$count" -lt 3 ]; then
  echo "FAIL: found only $count plan examples (the pattern no longer matches the docs?)"
  exit 1
fi
echo "$count plan examples, $failures failed"
[ "$failures" -eq 0 ]

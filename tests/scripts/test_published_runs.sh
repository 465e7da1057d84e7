#!/usr/bin/env bash
# The published-runs check (issue 33): `tessera plan --validate-published
# bench/published` plans every run of the suite at its layout; this fails
# when its MAPE rises more than 1 point above the figure the README states
# (the line "published-runs check: MAPE X %, ..."), or when more runs are
# called "does not fit" than the README states. It takes well under a second.
# Usage: test_published_runs.sh TESSERA_BINARY SOURCE_DIR
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # fail, finish, expect_exit, ...
bin=$1
src=$2
# The files' own format check first (Debian's python3 has tomllib).
/usr/bin/python3 "$src/bench/published/check_schema.py" >/dev/null ||
  die "$(/usr/bin/python3 "$src/bench/published/check_schema.py" | tail -5)"
out=$(cd "$src" && "$bin" plan --validate-published bench/published 2>&1) || die "plan --validate-published: $out"
echo "$out" | tail -3
line=$(grep -E '^  all +[0-9]+ runs' <<<"$out") || die "no summary line 'all N runs' in the output"
mape=$(sed -E 's/.*MAPE +([0-9.]+) %.*/\1/' <<<"$line")
runs=$(sed -E 's/^  all +([0-9]+) runs.*/\1/' <<<"$line")
misfits=$(grep -cE '^\S.* (NO) ' <<<"$out")
stated=$(grep -oE 'published-runs check: MAPE [0-9.]+ %' "$src/README.md" | head -1 | grep -oE '[0-9.]+') ||
  die "README.md states no 'published-runs check: MAPE X %'"
stated_misfits=$(grep -oE 'published-runs check: .*[0-9]+ of [0-9]+ runs called .does not fit.' "$src/README.md" |
  head -1 | sed -E 's/.* ([0-9]+) of [0-9]+ runs called.*/\1/')
[ -n "$stated_misfits" ] || die "README.md states no 'N of M runs called \"does not fit\"' on that line"
[ "$runs" -ge 40 ] || die "the suite has $runs runs, fewer than 40"
awk -v m="$mape" -v s="$stated" 'BEGIN { exit !(m <= s + 1.0) }' ||
  die "published-runs MAPE $mape % is more than 1 point above the README's $stated %"
[ "$misfits" -le "$stated_misfits" ] ||
  die "$misfits runs are called 'does not fit', the README states $stated_misfits"
echo "ok: $runs runs, MAPE $mape % (README: $stated %), $misfits called 'does not fit' (README: $stated_misfits)"

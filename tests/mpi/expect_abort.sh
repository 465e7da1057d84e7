#!/usr/bin/env bash
# expect_abort.sh PATTERN COMMAND...: passes when COMMAND exits non-zero AND
# its output matches PATTERN (grep -E). Used for jobs that must fail loudly,
# like the watchdog's abort, where a zero exit or a silent failure are bugs.
set -uo pipefail
pattern=$1
shift
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_abort: command exited 0, expected a failure" >&2
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$output"; then
  echo "expect_abort: output does not match: $pattern" >&2
  exit 1
fi
echo "expect_abort: exited $status with the expected message"

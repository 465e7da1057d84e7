# Sourced by every tests/scripts/test_*.sh (CMake runs only test_*.sh, so
# this file is no test of its own):
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The helpers the tests share. A test that needs its own variant of one keeps
# it, named for what it checks differently.

# fail MESSAGE: report one failed check and go on; finish reports the count.
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# die MESSAGE: fail and stop here (later checks need what this one found).
die() {
  echo "FAIL: $*"
  exit 1
}

# skip REASON: this machine cannot run the test (CTest counts exit 77 skipped).
skip() {
  echo "SKIP: $*"
  exit 77
}

# finish FAILED [PASSED]: the test's end. Exit 1 saying "N FAILED" when checks
# failed; otherwise say PASSED (if given) and exit 0.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures $1"
    exit 1
  fi
  [ -z "${2:-}" ] || echo "$2"
  exit 0
}

# scratch_dir: a fresh temporary directory in $tmp, removed when the test exits.
scratch_dir() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

# now: seconds since the epoch, with fractions; elapsed START [END]: END
# (default now) - START, one decimal.
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.1f", b - a }'; }

# expect_exit CODE PATTERN ARGS...: tessera ($bin) ARGS exits CODE and prints
# PATTERN, within $expect_timeout seconds (default 300). The output is left in
# $last_out.
expect_exit() { expect_run "$1" "" "${@:2}"; }

# expect_refusal PATTERN ARGS...: as expect_exit 2, and the refusal of bad
# input comes before any step, in one line.
expect_refusal() { expect_run 2 one_line "$@"; }

# expect_run CODE [one_line] PATTERN ARGS...: what the two above share.
expect_run() {
  local want=$1 one_line=$2 pattern=$3
  shift 3
  local out status=0
  out=$(timeout "${expect_timeout:-300}" "$bin" "$@" 2>&1) || status=$?  # safe under set -e
  if [ "$status" -ne "$want" ]; then
    fail "tessera $* exited $status (want $want):"
    echo "$out" | tail -5 | sed 's/^/    /'
  elif ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "tessera $*: no line matches /$pattern/:"
    echo "$out" | tail -5 | sed 's/^/    /'
  elif [ -n "$one_line" ] && grep -q '^step ' <<<"$out"; then
    fail "tessera $*: trained before refusing"
  elif [ -n "$one_line" ] && [ "$(grep -c . <<<"$out")" -ne 1 ]; then
    fail "tessera $*: refused with more than one line:"
    echo "$out" | sed 's/^/    /'
  else
    echo "ok: $(grep -E -- "$pattern" <<<"$out" | head -1)"
  fi
  last_out=$out
}

# losses METRICS_FILE [FIELD...]: one line per step record, "step loss [FIELD...]",
# each number exactly as logged (Python's repr).
losses() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
fields = sys.argv[2:]
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "step" in r and "loss" in r:
        print(r["step"], *(repr(r[k]) for k in ["loss"] + fields))
PY
}

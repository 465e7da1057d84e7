# Sourced by the CLI test scripts (test_finetune.sh, test_finetune_llama.sh):
# fail and expect_exit. Needs $bin (the tessera binary); counts failures.
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_exit CODE PATTERN ARGS...: tessera ARGS exits CODE and prints PATTERN.
# Exit 2 (bad input) must also come before any step and in one line. The
# output is left in $last_out.
expect_exit() {
  local want=$1 pattern=$2
  shift 2
  local out status
  out=$(timeout 300 "$bin" "$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ]; then
    fail "tessera $* exited $status (want $want):"
    echo "$out" | tail -5 | sed 's/^/    /'
  elif ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "tessera $*: no line matches /$pattern/:"
    echo "$out" | tail -5 | sed 's/^/    /'
  elif [ "$want" -eq 2 ] && grep -q '^step ' <<<"$out"; then
    fail "tessera $*: trained before refusing"
  elif [ "$want" -eq 2 ] && [ "$(grep -c . <<<"$out")" -ne 1 ]; then
    fail "tessera $*: refused with more than one line:"
    echo "$out" | sed 's/^/    /'
  else
    echo "ok: $(grep -E -- "$pattern" <<<"$out" | head -1)"
  fi
  last_out=$out
}

#!/usr/bin/env bash
# The sanitizer job: builds the single-process tests (unit tests, CLI
# checks, the fuzz harness and its seeds) with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-sanitize/ and runs them. CI runs it
# after the main suite (.ci/run); any finding fails it.
#
# Left out: the benchmarks and the mpirun tests (not built: Open MPI's
# launcher and shared-memory transport are uninstrumented and report
# themselves; the main suite runs them), and the tests too slow under ASan
# for CI, named in SLOW below (the main suite runs them too).
# Extra arguments go to ctest (e.g. -R Fuzz). Longer fuzzing under the
# sanitizers: TESSERA_FUZZ_CASES=20000 build-sanitize/tests/test_fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_SANITIZE=address,undefined -DTESSERA_BUILD_BENCH=OFF \
  -DTESSERA_BUILD_MPI_TESTS=OFF > /dev/null
cmake --build build-sanitize -j "$(nproc)"

# Findings are fatal (-fno-sanitize-recover=all, halt_on_error); leaks inside
# third-party libraries are suppressed in scripts/sanitize/lsan.supp (why:
# there), never ours.
export ASAN_OPTIONS="halt_on_error=1:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$root/scripts/sanitize/lsan.supp:print_suppressions=0"

# The loss-falls-on-real-text run (100 s in Release, many minutes under
# ASan) and the mpirun script test.
SLOW='^(TrainingLearns\.|test_mpi_errors$)'
cd build-sanitize
ctest --output-on-failure -j "$(nproc)" -E "$SLOW" "$@"

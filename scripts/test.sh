#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite (unit tests,
# the PyTorch reference, CLI checks and multi-rank tests under mpirun).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"

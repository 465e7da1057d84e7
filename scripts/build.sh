#!/usr/bin/env bash
# Configures and builds tessera (Release) into build/. Used by the README's
# commands and by CI; re-running only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache rewrites paths under its base directory to relative ones, so any
# clone of the same sources (CI clones elsewhere) hits the same cache entries.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)"

#!/usr/bin/env bash
# Installs every dependency of tessera from Debian's archive (run as root on
# Debian 12). Idempotent: packages already present are skipped quickly, so the
# README commands and .ci/run can call it every time.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libdnnl-dev                   # oneDNN: sgemm, picked by instruction set, on OpenMP
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev
  openmpi-bin libopenmpi-dev
  slurm-wlm munge               # a one-node Slurm for tests/scripts/test_slurm.sh (scripts/slurm/)
  python3-torch python3-numpy   # the PyTorch reference used by tests (Debian's /usr/bin/python3)
  fortunes                      # real English text for the default training job
  python3-protobuf              # the independent reader of --tensorboard-dir's event files (tests)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing packages (${missing[*]}); run as root to install them" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

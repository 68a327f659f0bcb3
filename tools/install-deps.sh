#!/usr/bin/env bash
# Installs the Debian packages Strata builds and tests with. Idempotent: when every
# package is already present it only runs dpkg-query once and exits (well under a second).
set -euo pipefail

packages=(
  cmake g++ make ninja-build pkg-config
  libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  qt6-base-dev xvfb xauth
  # The sanitizer suite and the fuzz targets (the fuzz preset): clang, its
  # sanitizer and libFuzzer runtimes, and its OpenMP for the cpu backend's threads.
  clang libclang-rt-dev libomp-dev
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"

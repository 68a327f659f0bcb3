#!/usr/bin/env bash
# Builds and runs the GPU calibration and the cuda backend tests on a single-GPU
# machine that has only the CUDA toolkit (nvcc, a host g++), CMake and ninja -
# none of the Debian libraries Strata builds with. Two steps (docs/calibration.md):
#
#   here, on a machine with tools/install-deps.sh done and a built tree:
#     calib/gpu-check.sh stage [DEPS]   copies the headers, shared libraries and CMake
#                                       package files the build needs into DEPS
#                                       (default build/gpu-deps, under 64 MiB) so it
#                                       can travel with the source tree
#   there, in the source tree with DEPS beside it:
#     calib/gpu-check.sh run [DEPS] [OUT]
#                                       configures with DEPS as the package prefix,
#                                       builds strata and the runtime and calibration
#                                       tests, runs them, then `strata calibrate
#                                       --backend cuda` (quick, then full with the
#                                       shipped models, then --check); logs and
#                                       profiles go to OUT (default build/gpu-out)
#
# NCCL is not staged (its library alone is over 200 MB): `run` finds it in
# $NCCL_ROOT, beside the CUDA toolkit, or in the nvidia-nccl Python wheel that
# CUDA images carry, and fails with a clear message when there is none.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}
deps=${2:-$here/build/gpu-deps}
multiarch=x86_64-linux-gnu

die() { echo "gpu-check: $*" >&2; exit 2; }

stage() {
  command -v dpkg >/dev/null || die "stage runs where the Debian packages are installed (tools/install-deps.sh)"
  local pkgs=(nlohmann-json3-dev libfmt-dev libspdlog-dev libcli11-dev libeigen3-dev
              libgtest-dev libgmock-dev libbenchmark-dev)
  rm -rf "$deps"
  mkdir -p "$deps"
  # Whole packages for the small libraries: headers, CMake package files, libraries.
  for p in "${pkgs[@]}"; do
    dpkg -L "$p" >/dev/null 2>&1 || die "package $p is not installed (run tools/install-deps.sh)"
    dpkg -L "$p" | while read -r f; do
      [[ -f "$f" || -L "$f" ]] || continue
      case "$f" in
        /usr/share/doc/*|/usr/share/lintian/*|/usr/share/man/*) continue ;;
      esac
      mkdir -p "$deps$(dirname "$f")"
      cp -a "$f" "$deps$f"
    done
  done
  # The shared libraries behind the -dev symlinks (fmt, spdlog, benchmark).
  for lib in libfmt.so libspdlog.so libbenchmark.so; do
    local real
    real=$(readlink -f "/usr/lib/$multiarch/$lib")
    cp -a "/usr/lib/$multiarch/$lib"* "$deps/usr/lib/$multiarch/" 2>/dev/null || true
    cp -a "$real" "$deps/usr/lib/$multiarch/"
  done
  # Boost is 160 MB of headers; Strata uses Boost.Graph's header-only part. Stage
  # the headers a build here actually included (ninja's dependency log) and
  # Boost's CMake package files.
  for ninja_file in "$here"/build/*/build.ninja; do
    [[ -f "$ninja_file" ]] || continue
    (cd "$(dirname "$ninja_file")" && ninja -t deps 2>/dev/null) | awk '{print $1}' | grep '^/usr/include/boost/' || true
  done | sort -u > "$deps/.boost-headers"
  [[ -s "$deps/.boost-headers" ]] || die "no built tree under build/ to read Boost's headers from (build strata first)"
  while read -r f; do
    mkdir -p "$deps$(dirname "$f")"
    cp -a "$f" "$deps$f"
  done < "$deps/.boost-headers"
  rm -f "$deps/.boost-headers"
  for d in Boost-1.74.0 boost_headers-1.74.0; do
    cp -a "/usr/lib/$multiarch/cmake/$d" "$deps/usr/lib/$multiarch/cmake/"
  done
  cp -a "/usr/lib/$multiarch/cmake/BoostDetectToolset-1.74.0.cmake" "$deps/usr/lib/$multiarch/cmake/"
  local size
  size=$(du -sm "$deps" | cut -f1)
  echo "gpu-check: staged into $deps (${size} MiB); carry it with the source tree"
  ((size < 64)) || die "staged folder is ${size} MiB, over the 64 MiB a device run carries"
}

find_nccl() {
  if [[ -n "${NCCL_ROOT:-}" && -f "$NCCL_ROOT/include/nccl.h" ]]; then echo "$NCCL_ROOT"; return; fi
  local nvcc_dir
  nvcc_dir=$(dirname "$(dirname "$(command -v nvcc)")")
  if [[ -f "$nvcc_dir/include/nccl.h" ]]; then echo "$nvcc_dir"; return; fi
  for py in python3 /opt/torch/.venv/bin/python3; do
    local d
    d=$("$py" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null) || continue
    if [[ -f "$d/include/nccl.h" ]]; then
      # The wheel ships libnccl.so.2 only; CMake's find_library wants libnccl.so.
      [[ -e "$d/lib/libnccl.so" ]] || ln -sf libnccl.so.2 "$d/lib/libnccl.so" 2>/dev/null ||
        { mkdir -p /tmp/nccl/lib && ln -sf "$d/lib/libnccl.so.2" /tmp/nccl/lib/libnccl.so &&
          ln -sf "$d/lib/libnccl.so.2" /tmp/nccl/lib/libnccl.so.2 && ln -sfn "$d/include" /tmp/nccl/include &&
          d=/tmp/nccl; }
      echo "$d"; return
    fi
  done
  return 1
}

run() {
  local out=${3:-$here/build/gpu-out}
  mkdir -p "$out"
  [[ -d "$deps/usr" ]] || die "no staged dependencies in $deps (run 'calib/gpu-check.sh stage' where they are installed)"
  command -v nvcc >/dev/null || die "nvcc not on PATH (install the CUDA toolkit or add its bin/)"
  command -v cmake >/dev/null && command -v ninja >/dev/null || die "cmake and ninja are needed"
  local nccl
  nccl=$(find_nccl) || die "NCCL not found: set NCCL_ROOT to a folder with include/nccl.h and lib/libnccl.so"
  export LD_LIBRARY_PATH="$deps/usr/lib/$multiarch:$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local jobs
  jobs=$(nproc)
  {
    echo "== machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
    nvcc --version | tail -n 2
    echo "nccl: $nccl"
  } 2>&1 | tee "$out/machine.txt"

  # Release build, GPU backend on, MPI and the GUI off (one process drives the
  # one GPU; its collectives need a second rank, so none are measured here).
  cmake -S "$here" -B "$here/build/gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTRATA_BUILD_GUI=OFF -DSTRATA_WITH_MPI=OFF -DSTRATA_WITH_CUDA=ON \
    -DCMAKE_PREFIX_PATH="$deps/usr;$deps/usr/lib/$multiarch/cmake;$deps/usr/share/eigen3/cmake" \
    -DCMAKE_CXX_FLAGS="-isystem $deps/usr/include -isystem $deps/usr/include/eigen3" \
    -DNCCL_ROOT="$nccl" -DCMAKE_CUDA_ARCHITECTURES=native 2>&1 | tee "$out/configure.log"
  grep -q "cuda_backend" "$out/configure.log" || true
  time cmake --build "$here/build/gpu" -j "$jobs" --target strata strata_runtime_tests strata_calib_tests \
    2>&1 | tail -n 40 | tee "$out/build.log"

  local rc=0
  echo "== runtime tests (cpu and cuda backends)"
  "$here/build/gpu/tests/runtime/strata_runtime_tests" --gtest_brief=1 2>&1 | tee "$out/runtime-tests.log" || rc=1
  echo "== calibration tests"
  STRATA_DATA_DIR="$here" "$here/build/gpu/tests/calib/strata_calib_tests" --gtest_brief=1 2>&1 |
    tee "$out/calib-tests.log" || rc=1
  local strata="$here/build/gpu/cli/strata"
  echo "== strata calibrate --backend cuda --quick"
  { time STRATA_DATA_DIR="$here" "$strata" calibrate --backend cuda --quick --out "$out/gpu-quick.json"; } \
    2>&1 | tee "$out/calibrate-quick.log" || rc=1
  if [[ "${GPU_CHECK_FULL:-1}" == 1 ]]; then
    echo "== strata calibrate --backend cuda (full, shipped models)"
    { time STRATA_DATA_DIR="$here" "$strata" calibrate --backend cuda --model gpt3-175b --model llama3-70b \
        --out "$out/gpu-profile.json"; } 2>&1 | tee "$out/calibrate-full.log" || rc=1
    echo "== strata calibrate --backend cuda --check"
    STRATA_DATA_DIR="$here" "$strata" calibrate --backend cuda --quick --check "$out/gpu-profile.json" \
      2>&1 | tee "$out/check.log" || rc=1
  fi
  echo "gpu-check: results in $out (exit $rc)"
  return $rc
}

case "$mode" in
  stage) stage ;;
  run) run "$@" ;;
  *) echo "usage: calib/gpu-check.sh stage [DEPS] | run [DEPS] [OUT]" >&2; exit 2 ;;
esac

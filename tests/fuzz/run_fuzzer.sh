#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time (ctest's fuzz.* entries):
#   run_fuzzer.sh TARGET SECONDS WORK_DIR SEED_DIR...
# The corpus grows in WORK_DIR/corpus (the seed directories are only read); a
# crash, leak, sanitizer report or an input slower than 10 s is written to
# WORK_DIR/crash-* (or leak-*, timeout-*) and exits non-zero.
set -euo pipefail
target=$1 seconds=$2 work=$3
shift 3
mkdir -p "$work/corpus"
exec "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 \
  -dict="$(dirname "$0")/json.dict" -artifact_prefix="$work/" "$work/corpus" "$@"

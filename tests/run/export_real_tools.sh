#!/usr/bin/env bash
# Runs Megatron-LM's own parse_args + validate_args, and DeepSpeed's own config
# and engine checks, on the exports of every plan in tests/run/export_matrix.json
# (torch stubbed, by the export-check tools). Needs source trees:
#   MEGATRON_LM_DIR  a Megatron-LM checkout (megatron/training/arguments.py)
#   DEEPSPEED_DIR    a DeepSpeed checkout (deepspeed/runtime/config.py), optional
#   EXPORT_CHECK_DIR the export-check tools (default: ../shared/tools/export-check
#                    beside the clone)
# Exits 77 (skipped, with the reason) when they are absent, as in CI.
#
# usage: export_real_tools.sh STRATA SOURCE_DIR
set -euo pipefail
strata=$1
src=$2
tools=${EXPORT_CHECK_DIR:-$src/../shared/tools/export-check}
if [[ -z "${MEGATRON_LM_DIR:-}" ]]; then
  echo "skipped: MEGATRON_LM_DIR is not set (point it at a Megatron-LM source tree to run its parser on the exports)"
  exit 77
fi
if [[ ! -f "$tools/check_args.py" ]]; then
  echo "skipped: no export-check tools at $tools (set EXPORT_CHECK_DIR)"
  exit 77
fi
if ! command -v python3 >/dev/null; then
  echo "skipped: python3 not found"
  exit 77
fi
export MEGATRON_SRC=$MEGATRON_LM_DIR DEEPSPEED_SRC=${DEEPSPEED_DIR:-} DS_ACCELERATOR=cpu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
matrix=$src/tests/run/export_matrix.json
mapfile -t models < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["models"]))' "$matrix")
cluster=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cluster"])' "$matrix")
count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["plans"]))' "$matrix")
failed=0
for model in "${models[@]}"; do
  for ((i = 0; i < count; i++)); do
    d="$work/$model-$i"
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["plans"][int(sys.argv[2])]))' \
      "$matrix" "$i" >"$work/plan.json"
    "$strata" -q export --model "$model" --plan "$work/plan.json" --cluster "$cluster" --fidelity folded \
      --force --out "$d" >/dev/null
    world=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["parallel"]["world_size"])' \
      "$d/strata-run.json")
    # The script's own CUDA_DEVICE_MAX_CONNECTIONS, which validate_args checks.
    if grep -q '^export CUDA_DEVICE_MAX_CONNECTIONS=1' "$d/megatron-args.sh"; then
      export CUDA_DEVICE_MAX_CONNECTIONS=1
    else
      unset CUDA_DEVICE_MAX_CONNECTIONS
    fi
    out=$(python3 "$tools/check_args.py" "$d/megatron-args.sh" "$world" 2>&1 || true)
    if grep -q '^VALIDATE OK' <<<"$out"; then
      echo "ok      megatron $model $(cat "$work/plan.json")"
    else
      echo "FAILED  megatron $model $(cat "$work/plan.json")"
      grep -E 'FAILED|RAISED|   at ' <<<"$out" || tail -5 <<<"$out"
      failed=1
    fi
    if [[ -n "${DEEPSPEED_DIR:-}" && -f "$d/deepspeed.json" ]]; then
      out=$(python3 "$src/tests/run/deepspeed_check.py" "$tools/ds_check.py" "$d/deepspeed.json" "$world" 1 2>&1 || true)
      if grep -q 'RAISED\|Error' <<<"$out"; then
        echo "FAILED  deepspeed $model $(cat "$work/plan.json")"
        grep -E 'RAISED|Error' <<<"$out" | head -3
        failed=1
      else
        echo "ok      deepspeed $model $(cat "$work/plan.json")"
      fi
    fi
  done
done
# MoE models: `strata export` writes megatron-args.sh alone (no strata-run.json:
# the simulator does not take MoE layers yet), so the world size is the matrix's.
mapfile -t moe_models < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["moe"]["models"]))' "$matrix")
moe_cluster=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["moe"]["cluster"])' "$matrix")
moe_world=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["moe"]["world_size"])' "$matrix")
moe_count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["moe"]["plans"]))' "$matrix")
for model in "${moe_models[@]}"; do
  for ((i = 0; i < moe_count; i++)); do
    d="$work/moe-$model-$i"
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["moe"]["plans"][int(sys.argv[2])]))' \
      "$matrix" "$i" >"$work/plan.json"
    "$strata" -q export --model "$model" --plan "$work/plan.json" --cluster "$moe_cluster" --force --out "$d" >/dev/null
    if grep -q '^export CUDA_DEVICE_MAX_CONNECTIONS=1' "$d/megatron-args.sh"; then
      export CUDA_DEVICE_MAX_CONNECTIONS=1
    else
      unset CUDA_DEVICE_MAX_CONNECTIONS
    fi
    out=$(python3 "$tools/check_args.py" "$d/megatron-args.sh" "$moe_world" 2>&1 || true)
    if grep -q '^VALIDATE OK' <<<"$out"; then
      echo "ok      megatron $model $(cat "$work/plan.json")"
    else
      echo "FAILED  megatron $model $(cat "$work/plan.json")"
      grep -E 'FAILED|RAISED|   at ' <<<"$out" || tail -5 <<<"$out"
      failed=1
    fi
  done
done
exit $failed

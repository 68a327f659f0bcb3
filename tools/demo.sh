#!/usr/bin/env bash
# The main job on the built-in default scenario: Llama-3 70B on 64 H100 (8 DGX H100).
#  1. strata memory: does the default plan fit, and what takes the memory;
#  2. strata export: the default plan as the files that launch it (strata-run.json,
#     Megatron-LM flags, DeepSpeed config where it maps, sbatch and mpirun scripts);
#  3. the loop on this machine, with a model small enough for a CPU:
#     strata validate --quick = calibrate the cpu backend (2 MPI ranks) -> simulate
#     -> export -> mpirun -n 2 strata run -> predicted vs measured, per 2-rank plan.
# It ends with the predicted-vs-measured table.
set -euo pipefail
strata=${1:-build/release/cli/strata}
model=llama3-70b
plan=llama3-70b-64
cluster=dgx-h100-8node

echo "== strata memory --model $model --plan $plan --cluster $cluster"
"$strata" memory --model "$model" --plan "$plan" --cluster "$cluster"

out=$(mktemp -d "${TMPDIR:-/tmp}/strata-demo-XXXXXX")
trap 'rm -rf "$out"' EXIT
echo
echo "== strata export --model $model --plan $plan --cluster $cluster --fidelity folded --out $out/launch"
"$strata" export --model "$model" --plan "$plan" --cluster "$cluster" --fidelity folded --out "$out/launch"
echo "-- $out/launch/megatron-args.sh --print"
bash "$out/launch/megatron-args.sh" --print | paste -sd' ' | fold -s -w 100

echo
echo "== strata validate --quick   (the loop on this machine's CPU: calibrate -> simulate -> export -> run -> compare)"
"$strata" validate --quick

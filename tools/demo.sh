#!/usr/bin/env bash
# The main job on the built-in default scenario: Llama-3 70B on 64 H100 (8 DGX H100).
set -euo pipefail
strata=${1:-build/release/cli/strata}
model=llama3-70b
plan=llama3-70b-64
cluster=dgx-h100-8node

echo "== strata memory --model $model --plan $plan --cluster $cluster"
"$strata" memory --model "$model" --plan "$plan" --cluster "$cluster"

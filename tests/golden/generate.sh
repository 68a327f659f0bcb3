#!/usr/bin/env bash
# Writes the golden outputs of the shipped scenarios into DIR: result.json and
# trace.json at both fidelities, `strata memory --json`, `strata validate
# --published --json`, two sweeps' sweep.csv/json and the export files.
# The renovation (issue 14) must leave every one byte-identical; tests/golden/check.sh
# regenerates them and compares with tests/golden/expected.sha256. A deliberate change of
# output is its own commit: run `tests/golden/record.sh build/release/cli/strata`
# and say why in the message.
#
# usage: generate.sh STRATA DIR
set -euo pipefail
# The outputs record their command line (strata-run.json's "source"): run as
# `strata` from inside DIR with relative paths, so they do not depend on where the
# clone or DIR is.
repo=$(cd "$(dirname "$0")/../.." && pwd)
strata_dir=$(dirname "$(realpath "$1")")
mkdir -p "$2"
cd "$2"
export PATH="$strata_dir:$PATH"
strata=strata
out=.

# scenario = model plan cluster
scenarios=(
  "gpt3-175b gpt3-175b-1024 dgx-a100-128node"
  "llama3-70b llama3-70b-64 dgx-h100-8node"
  "llama3-8b llama3-8b-8 dgx-h100-1node"
  "tiny tiny-2 dgx-a100-1node"
)

for s in "${scenarios[@]}"; do
  read -r model plan cluster <<<"$s"
  for fidelity in full folded; do
    d="$out/simulate-$plan-$fidelity"
    rm -rf "$d"
    "$strata" -q simulate --model "$model" --plan "$plan" --cluster "$cluster" \
      --fidelity "$fidelity" --out "$d" >/dev/null
  done
  "$strata" -q memory --model "$model" --plan "$plan" --cluster "$cluster" \
    --json "$out/memory-$plan.json" >/dev/null
  d="$out/export-$plan"
  rm -rf "$d"
  "$strata" -q export --model "$model" --plan "$plan" --cluster "$cluster" \
    --fidelity folded --out "$d" >/dev/null
done

"$strata" -q validate --published --json "$out/validate-published.json" >/dev/null

rm -rf "$out/sweep-llama3-70b-64" "$out/sweep-gpt3-175b-128"
"$strata" -q sweep --model llama3-70b --cluster dgx-h100-8node --global-batch-size 128 \
  --full-top 1 --threads 2 --out "$out/sweep-llama3-70b-64" >/dev/null
"$strata" -q sweep --model gpt3-175b --cluster dgx-a100-16node --global-batch-size 256 \
  --where 'zero_stage in [0,1]' --full-top 1 --threads 2 --out "$out/sweep-gpt3-175b-128" >/dev/null

# strata-run.json names the profile it was predicted with by its absolute path, which
# differs from clone to clone: write the clone's root as <repo>/ so
# the checksums hold in any clone.
for f in export-*/strata-run.json; do
  sed -i "s|$repo/|<repo>/|g" "$f"
done

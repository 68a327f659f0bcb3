#!/usr/bin/env bash
# `strata import calculon` on Calculon's own files: every execution in its
# validation/ and examples/ folders, each with the model of its name (the
# example's is megatron-1T), on each of its systems/; then `strata simulate` on
# the imports onto systems/a100_80g.json (the A100 runs Calculon validates
# against). Needs a Calculon source tree:
#   CALCULON_DIR  a calculon-ai/calculon checkout (models/, systems/, validation/)
# Exits 77 (skipped, with the reason) when it is absent, as in CI.
#
# usage: calculon_snapshot.sh STRATA
set -euo pipefail
strata=$1
if [[ -z "${CALCULON_DIR:-}" ]]; then
  echo "skipped: CALCULON_DIR is not set (point it at a calculon-ai/calculon checkout to import its files)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
imported=0 simulated=0 failed=0
for execution in "$CALCULON_DIR"/validation/*/*/*.json "$CALCULON_DIR"/examples/*.json; do
  name=$(basename "$execution" .json)
  model="$CALCULON_DIR/models/${name%_*}.json"
  [[ -f "$model" ]] || model="$CALCULON_DIR/models/megatron-1T.json"
  for system in "$CALCULON_DIR"/systems/*.json; do
    out="$work/$(basename "$(dirname "$execution")")-$name-$(basename "$system" .json)"
    if ! "$strata" import calculon --application "$model" --execution "$execution" --system "$system" \
        --out "$out" > "$out.log" 2>&1; then
      echo "FAILED import: $execution on $system"; cat "$out.log"; failed=$((failed + 1)); continue
    fi
    imported=$((imported + 1))
    [[ "$(basename "$system")" == a100_80g.json ]] || continue
    if ! "$strata" simulate --model "$out/model.json" --plan "$out/plan.json" --cluster "$out/cluster.json" \
        --out "$out/sim" > "$out/sim.log" 2>&1; then
      echo "FAILED simulate: $execution on $system"; cat "$out/sim.log"; failed=$((failed + 1)); continue
    fi
    simulated=$((simulated + 1))
    echo "$name on a100_80g: $(grep -m1 'step time' "$out/sim.log")"
  done
done
echo "imported $imported, simulated $simulated, failed $failed"
[[ $imported -gt 0 && $failed -eq 0 ]]

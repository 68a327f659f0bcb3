#!/usr/bin/env bash
# Records the checksums of the golden outputs as the new expectation (a deliberate
# change of output: commit it on its own, with the reason).
#
# usage: record.sh STRATA
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-golden-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$here/generate.sh" "$1" "$work"
(cd "$work" && find . -type f | sort | sed 's|^\./||' | xargs sha256sum) >"$here/expected.sha256"
echo "recorded $(wc -l <"$here/expected.sha256") checksums in $here/expected.sha256"

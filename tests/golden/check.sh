#!/usr/bin/env bash
# Regenerates the golden outputs (generate.sh) into a temporary folder and compares
# each file with the checksum recorded in expected.sha256 (the outputs themselves are
# 95 MB, mostly traces: too large for git). On a mismatch it names the files; to see
# the difference, build the previous commit and diff its generate.sh output with this
# one's (both are byte-for-byte reproducible).
#
# usage: check.sh STRATA
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-golden-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$here/generate.sh" "$1" "$work"
cd "$work"
# Every expected file present and equal, and no file that is not expected.
find . -type f | sort | sed 's|^\./||' >"$work.files"
sed 's/^[0-9a-f]*  //' "$here/expected.sha256" | diff -u - "$work.files" || {
  echo "golden: the set of output files changed" >&2; rm -f "$work.files"; exit 1; }
rm -f "$work.files"
if ! sha256sum --quiet -c "$here/expected.sha256"; then
  echo "golden: outputs differ from tests/golden/expected.sha256 (see tests/golden/generate.sh)" >&2
  exit 1
fi
echo "golden: $(wc -l <"$here/expected.sha256") files byte-identical"

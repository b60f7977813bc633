#!/usr/bin/env bash
# make run: emulators + sandbox provider + local host, in the foreground.
# Ctrl-C stops the local host, then the emulators this script started.
#
# DynamoDB Local keeps its data on disk under $OUTBOX_DATA_DIR (default
# localstack/.run/data), so intents, grants and tokens survive a restart or a
# crash of `make run`; so does the sandbox provider (effects, accounts,
# faults, webhook settings and its id counters, in sandbox/state.json). RESET=1 (make run-reset) deletes it first and starts
# clean. The queue emulator keeps messages in memory only: delayed retries
# queued before a restart are lost, and the sweeper (every 15 s) finds those
# intents in the table and queues them again. Tests never use this directory.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DATA="${OUTBOX_DATA_DIR:-$ROOT/localstack/.run/data}"
mkdir -p "$DATA"
DATA="$(cd "$DATA" && pwd)"
export OUTBOX_DDB_DATA_DIR="$DATA/dynamodb"
export OUTBOX_SANDBOX_STATE_FILE="$DATA/sandbox/state.json"
bash localstack/install.sh
if [ "${RESET:-0}" = 1 ]; then
	# An emulator left running by a crashed run holds the files open.
	bash localstack/emulators.sh stop
	rm -rf "$OUTBOX_DDB_DATA_DIR" "$DATA/sandbox"
	echo "run: RESET=1: deleted the local data ($OUTBOX_DDB_DATA_DIR, $DATA/sandbox); starting clean" >&2
fi
bash localstack/emulators.sh start
trap 'bash localstack/emulators.sh stop' EXIT
eval "$(bash localstack/emulators.sh env)"
mkdir -p bin
go build -o bin/outbox-local ./cmd/outbox-local
bin/outbox-local &
pid=$!
trap 'kill -INT $pid 2>/dev/null || true' INT TERM
wait $pid || true
wait $pid 2>/dev/null || true

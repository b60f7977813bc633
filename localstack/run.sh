#!/usr/bin/env bash
# make run: emulators + sandbox provider + local host, in the foreground.
# Ctrl-C stops the local host, then the emulators this script started.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash localstack/install.sh
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

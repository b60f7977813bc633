#!/usr/bin/env bash
# make bench: cost and speed of intake and delivery, as ratios against the raw
# emulator measured side by side in one run (issue 9).
#
#   1. core testing.B benchmarks (-benchmem)       -> build/bench/core-bench.txt
#   2. DynamoDB Local + fauxqs on their own ports and run dir (a `make run` or
#      `make test` next door is untouched), stopped again on exit
#   3. bench/cmd/outbox-bench: the local stack in-process against them
#                                                   -> build/bench/results.json + a table
#
# Settings: OUTBOX_BENCH_DDB_PORT / OUTBOX_BENCH_SQS_PORT (default 58600 / 59600),
# OUTBOX_BENCH_BENCHTIME (go test -benchtime, default 1s); extra arguments go to
# the runner (e.g. `bash bench/run.sh -rounds 5`, `-h` lists them).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$(date +%s)
OUT="$ROOT/build/bench"
mkdir -p "$OUT"

# Build like `make build` (CGO off, -trimpath), so the runner, its cold-start
# proxy build and the Lambda artifacts share one build cache.
export CGO_ENABLED=0

echo "bench: core benchmarks"
go test -trimpath -run '^$' -bench . -benchmem -count 1 -benchtime "${OUTBOX_BENCH_BENCHTIME:-1s}" ./core/ | tee "$OUT/core-bench.txt"

echo "bench: building the runner"
go build -trimpath -o "$OUT/outbox-bench" ./bench/cmd/outbox-bench

export OUTBOX_DDB_PORT="${OUTBOX_BENCH_DDB_PORT:-58600}"
export OUTBOX_SQS_PORT="${OUTBOX_BENCH_SQS_PORT:-59600}"
export OUTBOX_EMULATOR_RUN_DIR="$ROOT/localstack/.run/bench"
bash localstack/emulators.sh start
trap 'bash localstack/emulators.sh stop' EXIT
eval "$(bash localstack/emulators.sh env)"

"$OUT/outbox-bench" -out "$OUT/results.json" -profile-dir "$OUT" -core-bench "$OUT/core-bench.txt" "$@"
echo "bench: CPU profile of the throughput slices: $OUT/cpu-throughput.pprof"
echo "       e.g. go tool pprof -top -tagfocus 'variant=intake_c8|intake-server' $OUT/outbox-bench $OUT/cpu-throughput.pprof"
echo "make bench: $(($(date +%s) - start))s"

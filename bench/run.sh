#!/usr/bin/env bash
# make bench: cost and speed of intake and delivery, as ratios against the raw
# emulator measured side by side in one run (issue 9).
#
#   1. core testing.B benchmarks (-benchmem)       -> build/bench/core-bench.txt
#   2. DynamoDB Local + fauxqs on their own ports and run dir (a `make run` or
#      `make test` next door is untouched), stopped again on exit
#   3. bench/cmd/outbox-bench: the local stack in-process against them
#                                                   -> build/bench/results.json + a table
#   4. bench/cost.sh (make cost): the stack's idle monthly cost, item by item
#                                                   -> usd_per_month_idle in results.json
#
# Settings: OUTBOX_BENCH_DDB_PORT / OUTBOX_BENCH_SQS_PORT (default 28600 / 29600),
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

export OUTBOX_DDB_PORT="${OUTBOX_BENCH_DDB_PORT:-28600}"
export OUTBOX_SQS_PORT="${OUTBOX_BENCH_SQS_PORT:-29600}"
export OUTBOX_EMULATOR_RUN_DIR="$ROOT/localstack/.run/bench"
bash localstack/emulators.sh start
trap 'bash localstack/emulators.sh stop' EXIT
eval "$(bash localstack/emulators.sh env)"

runner() { "$OUT/outbox-bench" -profile-dir "$OUT" -core-bench "$OUT/core-bench.txt" "$@"; }
if [ $# -gt 0 ]; then
	runner -out "$OUT/results.json" "$@"
else
	# DynamoDB Local slows down as it accumulates data (stream records
	# outlive deleted tables): after the other phases, the scale runs'
	# latencies and drain rates measured the emulator, not the outbox
	# (isolation p99 2.9 s "alone", a 5,000-orphan drain timing out). So
	# each scale run gets freshly started emulators, and its keys are
	# merged into the one results.json (-merge); every ratio is still
	# measured side by side inside one run.
	status=0
	runner -out "$OUT/results.json" -only e2e,inline,retry,reconcile,e2e256k,artifacts,pace,idle,throughput || status=$?
	for part in spread isolation repair; do
		bash localstack/emulators.sh stop >/dev/null
		bash localstack/emulators.sh start
		runner -out "$OUT/results.json" -merge -only scale -scale-parts "$part" >/dev/null || status=$?
	done
	# Retention (issue 27) on fresh emulators too: it writes and prunes
	# 1,000 intents and waits out a shortened window.
	bash localstack/emulators.sh stop >/dev/null
	bash localstack/emulators.sh start
	runner -out "$OUT/results.json" -merge -only retention >/dev/null || status=$?
	runner -out "$OUT/results.json" -merge -only none || status=$?
	[ "$status" = 0 ] || echo "bench: a phase failed (see errors in $OUT/results.json)" >&2
fi
# The idle cost (make cost): the template priced, with the idle phase's sweep.
bash bench/cost.sh || status=$?
echo "bench: CPU profile of the throughput slices: $OUT/cpu-throughput.pprof"
echo "       e.g. go tool pprof -top -tagfocus 'variant=intake_c8|intake-server' $OUT/outbox-bench $OUT/cpu-throughput.pprof"
echo "make bench: $(($(date +%s) - start))s"
exit "${status:-0}"

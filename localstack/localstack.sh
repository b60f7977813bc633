#!/usr/bin/env bash
# LocalStack path (machines with a Docker engine): up | down | status | env
#
#   localstack/localstack.sh up            # docker compose up, wait for the init hook
#   eval "$(localstack/localstack.sh env)" # AWS_ENDPOINT_URL=http://127.0.0.1:4566 + region/creds
#   go test ./...                          # the same integration tests, other endpoint
#   localstack/localstack.sh down
#
# The compose file pins the LocalStack image; init/ready.d/10-outbox.sh creates the table,
# queues and bucket. CI does not run this path: it verifies the Docker-free emulators
# (localstack/emulators.sh, `make run` / `make test`).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${OUTBOX_LOCALSTACK_PORT:-4566}"
ENDPOINT="http://127.0.0.1:$PORT"
READY_TIMEOUT="${OUTBOX_LOCALSTACK_TIMEOUT:-180}"

say() { printf 'localstack: %s\n' "$*" >&2; }

need_docker() {
	if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
		echo "No Docker engine is running here; the LocalStack path needs Docker. The Docker-free emulators (make run / make test) are what CI verifies." >&2
		exit 2
	fi
}

compose() {
	if docker compose version >/dev/null 2>&1; then
		docker compose -f "$HERE/docker-compose.yml" "$@"
	elif command -v docker-compose >/dev/null 2>&1; then
		docker-compose -f "$HERE/docker-compose.yml" "$@"
	else
		say "neither 'docker compose' (plugin) nor 'docker-compose' is installed"
		exit 2
	fi
}

# GET $1 from the edge port; prints the body.
http_get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 5 "$ENDPOINT$1"
	else
		timeout 5 bash -c '
			exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
			printf "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" "$1" >&3
			sed "1,/^\r\?$/d" <&3
		' "$PORT" "$1"
	fi
}

cmd_up() {
	need_docker
	OUTBOX_LOCALSTACK_PORT="$PORT" compose up -d
	say "waiting for LocalStack and the init hook (up to ${READY_TIMEOUT}s)"
	local deadline=$((SECONDS + READY_TIMEOUT)) body=""
	while :; do
		body="$(http_get /_localstack/init/ready 2>/dev/null || true)"
		if printf '%s' "$body" | grep -q '"completed": *true'; then
			break
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			say "not ready after ${READY_TIMEOUT}s; last container logs:"
			compose logs --tail 40 >&2 || true
			exit 1
		fi
		sleep 1
	done
	if printf '%s' "$body" | grep -q '"state": *"ERROR"'; then
		say "an init hook failed:"
		compose logs --tail 60 >&2 || true
		exit 1
	fi
	say "ready on $ENDPOINT (table outbox, queues outbox-retry/-retry-dlq/-inbox, bucket outbox-backups)"
}

cmd_down() {
	need_docker
	compose down --remove-orphans
}

cmd_status() {
	need_docker
	compose ps
	http_get /_localstack/health && echo
}

cmd_env() {
	echo "export AWS_ENDPOINT_URL=$ENDPOINT"
	# The service-specific variables would win over AWS_ENDPOINT_URL; clear the Docker-free ones.
	echo "unset AWS_ENDPOINT_URL_DYNAMODB AWS_ENDPOINT_URL_DYNAMODB_STREAMS AWS_ENDPOINT_URL_SQS AWS_ENDPOINT_URL_S3"
	echo "export AWS_REGION=${AWS_REGION:-us-east-1}"
	[ -n "${AWS_ACCESS_KEY_ID:-}" ] || echo "export AWS_ACCESS_KEY_ID=test"
	[ -n "${AWS_SECRET_ACCESS_KEY:-}" ] || echo "export AWS_SECRET_ACCESS_KEY=test"
	echo "export AWS_EC2_METADATA_DISABLED=true"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
*)
	echo "usage: $0 up|down|status|env" >&2
	exit 2
	;;
esac

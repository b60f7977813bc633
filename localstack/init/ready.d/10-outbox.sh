#!/bin/bash
# LocalStack ready.d hook: create the outbox's resources, idempotently. The container has no
# Go, so this mirrors `go run ./cmd/outboxctl setup` (adapters/dynamo/schema.go,
# adapters/sqsqueue/setup.go) with awslocal:
#   table  outbox          pk S HASH, sk S RANGE; GSI gsi1 (gsi1pk S HASH, gsi1sk S RANGE, KEYS_ONLY), gsi2 (gsi2pk/gsi2sk, KEYS_ONLY);
#                          stream NEW_AND_OLD_IMAGES; PAY_PER_REQUEST; TTL on expiresAt
#   queues outbox-retry-dlq, outbox-retry (VisibilityTimeout 360, RedrivePolicy
#          maxReceiveCount 5 -> outbox-retry-dlq), outbox-inbox
#   bucket outbox-backups
# Running it again converges (existing resources are kept; queue attributes are re-applied).
set -euo pipefail

TABLE="${OUTBOX_TABLE:-outbox}"
PREFIX="${OUTBOX_QUEUE_PREFIX:-outbox}"
BUCKET="${OUTBOX_BACKUP_BUCKET:-outbox-backups}"
VISIBILITY=360
MAX_RECEIVE=5
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

log() { echo "outbox-init: $*"; }

# --- DynamoDB ---------------------------------------------------------------------
if awslocal dynamodb describe-table --table-name "$TABLE" >/dev/null 2>&1; then
	log "table $TABLE exists"
else
	log "creating table $TABLE"
	awslocal dynamodb create-table \
		--table-name "$TABLE" \
		--billing-mode PAY_PER_REQUEST \
		--attribute-definitions \
		AttributeName=pk,AttributeType=S AttributeName=sk,AttributeType=S \
		AttributeName=gsi1pk,AttributeType=S AttributeName=gsi1sk,AttributeType=S \
		AttributeName=gsi2pk,AttributeType=S AttributeName=gsi2sk,AttributeType=S \
		--key-schema AttributeName=pk,KeyType=HASH AttributeName=sk,KeyType=RANGE \
		--global-secondary-indexes '[{"IndexName":"gsi1","KeySchema":[{"AttributeName":"gsi1pk","KeyType":"HASH"},{"AttributeName":"gsi1sk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}},{"IndexName":"gsi2","KeySchema":[{"AttributeName":"gsi2pk","KeyType":"HASH"},{"AttributeName":"gsi2sk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}]' \
		--stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES \
		>/dev/null
fi
awslocal dynamodb wait table-exists --table-name "$TABLE"

ttl="$(awslocal dynamodb describe-time-to-live --table-name "$TABLE" \
	--query 'TimeToLiveDescription.TimeToLiveStatus' --output text 2>/dev/null || echo UNKNOWN)"
case "$ttl" in
ENABLED | ENABLING) log "TTL on $TABLE already $ttl" ;;
*)
	log "enabling TTL (expiresAt) on $TABLE"
	awslocal dynamodb update-time-to-live --table-name "$TABLE" \
		--time-to-live-specification Enabled=true,AttributeName=expiresAt >/dev/null
	;;
esac
# Point-in-time recovery is on in AWS (CDK); emulators may not implement it, so best effort.
awslocal dynamodb update-continuous-backups --table-name "$TABLE" \
	--point-in-time-recovery-specification PointInTimeRecoveryEnabled=true >/dev/null 2>&1 ||
	log "point-in-time recovery not supported here (skipped)"

# --- SQS ----------------------------------------------------------------------------
# ensure_queue NAME ATTRIBUTES_JSON: create with the attributes, or re-apply them if the queue
# exists (CreateQueue on an existing name with other attributes fails with QueueNameExists).
ensure_queue() {
	local name="$1" attrs="$2" url
	if url="$(awslocal sqs get-queue-url --queue-name "$name" --query QueueUrl --output text 2>/dev/null)"; then
		log "queue $name exists"
		if [ "$attrs" != "{}" ]; then
			awslocal sqs set-queue-attributes --queue-url "$url" --attributes "$attrs" >/dev/null
		fi
	else
		log "creating queue $name"
		url="$(awslocal sqs create-queue --queue-name "$name" --attributes "$attrs" --query QueueUrl --output text)"
	fi
	QUEUE_URL="$url"
}

ensure_queue "$PREFIX-retry-dlq" '{}'
dlq_arn="$(awslocal sqs get-queue-attributes --queue-url "$QUEUE_URL" --attribute-names QueueArn \
	--query Attributes.QueueArn --output text)"
redrive="{\\\"deadLetterTargetArn\\\":\\\"$dlq_arn\\\",\\\"maxReceiveCount\\\":\\\"$MAX_RECEIVE\\\"}"
ensure_queue "$PREFIX-retry" "{\"VisibilityTimeout\":\"$VISIBILITY\",\"RedrivePolicy\":\"$redrive\"}"
ensure_queue "$PREFIX-inbox" '{}'

# --- S3 -------------------------------------------------------------------------------
if awslocal s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1; then
	log "bucket $BUCKET exists"
else
	log "creating bucket $BUCKET"
	awslocal s3api create-bucket --bucket "$BUCKET" >/dev/null
fi

log "done: table $TABLE, queues $PREFIX-retry-dlq $PREFIX-retry $PREFIX-inbox, bucket $BUCKET"

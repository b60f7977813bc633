package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/localstack/emulatortest"
)

// testTable creates a fresh table on DynamoDB Local for one test and drops it
// afterwards. Without an emulator the test is skipped, unless make test
// requires the emulators (OUTBOX_REQUIRE_EMULATORS=1): then it fails.
func testTable(t *testing.T, prefix string) (*dynamodb.Client, string) {
	t.Helper()
	emulatortest.Require(t, "DYNAMODB")
	ctx := context.Background()
	clients, err := awsconfig.LoadClients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	table := prefix + "_" + hex.EncodeToString(b[:])
	if err := EnsureTable(ctx, clients.DynamoDB, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = clients.DynamoDB.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return clients.DynamoDB, table
}

// countingDB counts the reads that reach DynamoDB through it.
type countingDB struct {
	*dynamodb.Client
	gets, batches, queries atomic.Int64
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.Client.GetItem(ctx, in, o...)
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.batches.Add(1)
	return c.Client.BatchGetItem(ctx, in, o...)
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.Client.Query(ctx, in, o...)
}

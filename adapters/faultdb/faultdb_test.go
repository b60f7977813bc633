package faultdb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/adapters/faultdb"
	"github.com/botharness/outbox/localstack/emulatortest"
)

func client(t *testing.T, inj *faultdb.Injector) (*dynamodb.Client, string) {
	t.Helper()
	emulatortest.Require(t, "DYNAMODB")
	ctx := context.Background()
	cfg, err := awsconfig.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 20 * time.Millisecond })
	}
	base := awsconfig.New(cfg).DynamoDB
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "faultdb_" + hex.EncodeToString(b[:])
	_, err = base.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = base.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	inj.Register(&cfg)
	return awsconfig.New(cfg).DynamoDB, table
}

func item(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "X"}}
}

func put(ctx context.Context, db *dynamodb.Client, table, pk string, onlyNew bool) error {
	in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(pk)}
	if onlyNew {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	_, err := db.PutItem(ctx, in)
	return err
}

func exists(t *testing.T, db *dynamodb.Client, table, pk string) bool {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: item(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Item) > 0
}

func TestInjectedErrorsAreTheSDKsTypedErrors(t *testing.T) {
	inj := faultdb.New(1)
	db, table := client(t, inj)
	ctx := context.Background()

	// A single throttle is absorbed by the SDK's retryer.
	inj.Add(faultdb.Fault{Kind: faultdb.Throttling, Ops: []string{"PutItem"}})
	if err := put(ctx, db, table, "a", false); err != nil {
		t.Fatalf("one throttle should be retried by the SDK: %v", err)
	}
	if !exists(t, db, table, "a") {
		t.Fatal("item a missing")
	}

	cases := []struct {
		kind  faultdb.Kind
		check func(error) bool
	}{
		{faultdb.Throttling, func(err error) bool { var e *types.ThrottlingException; return errors.As(err, &e) }},
		{faultdb.ThroughputExceeded, func(err error) bool { var e *types.ProvisionedThroughputExceededException; return errors.As(err, &e) }},
		{faultdb.InternalError, func(err error) bool { var e *types.InternalServerError; return errors.As(err, &e) }},
	}
	for _, c := range cases {
		pk := "b-" + string(c.kind)
		inj.Add(faultdb.Fault{Kind: c.kind, Ops: []string{"PutItem"}, Attempts: 10})
		err := put(ctx, db, table, pk, false)
		if err == nil || !c.check(err) {
			t.Fatalf("%s: got %T %v", c.kind, err, err)
		}
		if exists(t, db, table, pk) {
			t.Fatalf("%s: the request must not have been applied", c.kind)
		}
	}
	if got := inj.Counts()[faultdb.Throttling]; got != 1+3 {
		t.Fatalf("throttles applied = %d, want 4 (1 absorbed + 3 SDK attempts)", got)
	}
}

func TestResponseLostIsTheUncertainWriteWindow(t *testing.T) {
	inj := faultdb.New(2)
	db, table := client(t, inj)
	ctx := context.Background()

	// Applied, response lost as a 500: the SDK resends, and a conditional
	// create then fails against its own first write.
	inj.Add(faultdb.Fault{Kind: faultdb.ResponseLost, Ops: []string{"PutItem"}})
	err := put(ctx, db, table, "c", true)
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("want the SDK's retry to hit our own write (ConditionalCheckFailed), got %v", err)
	}
	if !exists(t, db, table, "c") {
		t.Fatal("the first request was not applied")
	}

	// Surfaced: applied, the caller gets a transport error and no retry.
	inj.Add(faultdb.Fault{Kind: faultdb.ResponseLostSurfaced, Ops: []string{"PutItem"}})
	if err := put(ctx, db, table, "d", true); !errors.Is(err, faultdb.ErrConnectionLost) {
		t.Fatalf("got %v", err)
	}
	if !exists(t, db, table, "d") {
		t.Fatal("the request was not applied")
	}
}

type failWrites struct{ after int }

func (f *failWrites) Before(_ context.Context, c faultdb.Call) error {
	if c.IsWrite() {
		if f.after == 0 {
			return errors.New("crashed")
		}
		f.after--
	}
	return nil
}
func (f *failWrites) After(_ context.Context, _ faultdb.Call, err error) error { return err }

func TestHooksAndSeededRandomSchedule(t *testing.T) {
	inj := faultdb.New(3)
	db, table := client(t, inj)
	ctx := faultdb.WithHook(context.Background(), &failWrites{after: 1})
	if err := put(ctx, db, table, "e1", false); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, db, table, "e2", false); err == nil || exists(t, db, table, "e2") {
		t.Fatalf("the hook should have stopped the second write: %v", err)
	}
	inj.SetEnabled(false)
	if err := put(ctx, db, table, "e3", false); err != nil {
		t.Fatalf("a disabled injector runs no hooks: %v", err)
	}

	seq := func(seed uint64) []faultdb.Injected {
		inj := faultdb.New(seed)
		inj.SetRandom(0.5, 1, []string{"GetItem"}, faultdb.Throttling, faultdb.InternalError)
		c := dynamodb.New(db.Options(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, inj.APIOption) })
		for i := 0; i < 20; i++ {
			_, _ = c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: item("a")})
		}
		return inj.Log()
	}
	a, b := seq(42), seq(42)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("same seed, different schedules: %v vs %v", a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different schedules at %d: %v vs %v", i, a, b)
		}
	}
}

package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SchemaAPI is what EnsureTable needs.
type SchemaAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
}

// TTLAttribute holds the epoch-seconds expiry of records that expire.
const TTLAttribute = "expiresAt"

// TableInput is the table definition; the CDK stack declares the same shape.
func TableInput(name string) *dynamodb.CreateTableInput {
	s := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{s("pk"), s("sk"), s("gsi1pk"), s("gsi1sk"), s("gsi2pk"), s("gsi2sk")},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(gsiName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("gsi1pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("gsi1sk"), KeyType: types.KeyTypeRange},
			},
			// Keys only: listings read the items behind (see hydrate).
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, {
			// Profile index for backups: every item of a bot, keys only.
			IndexName: aws.String(gsi2Name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("gsi2pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("gsi2sk"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	}
}

// EnsureTable creates the table if it does not exist and waits until it is
// active. Safe to run repeatedly.
func EnsureTable(ctx context.Context, db SchemaAPI, name string) error {
	_, err := db.CreateTable(ctx, TableInput(name))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err == nil && out.Table.TableStatus == types.TableStatusActive {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("table %s not active after 60s (last error: %v)", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err == nil || !errors.As(err, &inUse) {
		_, ttlErr := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
		})
		if ttlErr != nil {
			// A repeat call errors with "TimeToLive is already enabled",
			// which is the state we want.
			return nil
		}
	}
	return nil
}

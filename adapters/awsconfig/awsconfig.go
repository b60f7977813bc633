// Package awsconfig is the one place that loads AWS configuration. Endpoints
// come from the SDK's standard variables (AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_DYNAMODB_STREAMS,
// AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_S3), never from code.
package awsconfig

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Emulated reports whether an endpoint is set for service ("DYNAMODB",
// "S3": AWS_ENDPOINT_URL_<service>, or AWS_ENDPOINT_URL for every service),
// as the local emulators set them; AWS itself needs none.
func Emulated(service string) bool {
	return os.Getenv("AWS_ENDPOINT_URL_"+service) != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
}

// Load reads the default AWS configuration (environment, shared files, role).
func Load(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}

// Clients are the service clients the functions use.
type Clients struct {
	DynamoDB *dynamodb.Client
	Streams  *dynamodbstreams.Client
	SQS      *sqs.Client
	S3       *s3.Client
	Secrets  *secretsmanager.Client
	SNS      *sns.Client
}

// New builds every client from cfg.
func New(cfg aws.Config) Clients {
	return Clients{
		DynamoDB: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
			// DynamoDB Local sends error responses whose CRC32 header does not
			// match the body; against an emulator the check only produces noise.
			o.DisableValidateResponseChecksum = Emulated("DYNAMODB")
		}),
		Streams: dynamodbstreams.NewFromConfig(cfg),
		SQS:     sqs.NewFromConfig(cfg),
		Secrets: secretsmanager.NewFromConfig(cfg),
		SNS:     sns.NewFromConfig(cfg),
		S3: s3.NewFromConfig(cfg, func(o *s3.Options) {
			// Emulators (fauxqs, LocalStack) serve buckets by path, not by host.
			o.UsePathStyle = Emulated("S3")
		}),
	}
}

// LoadClients is Load followed by New.
func LoadClients(ctx context.Context) (Clients, error) {
	cfg, err := Load(ctx)
	if err != nil {
		return Clients{}, err
	}
	return New(cfg), nil
}

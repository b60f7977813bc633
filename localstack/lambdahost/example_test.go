package lambdahost_test

import (
	"context"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/localstack/lambdahost"
)

// Example wires the local host the way `make run` does: the real handlers
// behind an HTTP API with an authorizer, the dispatcher on the table's stream
// with the deployed filter, the retrier on the retry queue and the sweeper on
// a schedule. (Stub handlers stand in for the real ones here.)
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	cfg, err := config.LoadDefaultConfig(ctx) // honours AWS_ENDPOINT_URL_DYNAMODB / _SQS
	if err != nil {
		log.Fatal(err)
	}
	ddb := dynamodb.NewFromConfig(cfg)

	var (
		intake     lambdahost.HTTPHandler
		authorizer lambdahost.Authorizer
		dispatch   lambdahost.StreamHandler
		retrier    lambdahost.SQSHandler
		sweeper    lambdahost.ScheduledHandler
	)

	gw := lambdahost.NewGateway(lambdahost.GatewayOptions{Health: func() error {
		_, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("outbox")})
		return err
	}})
	gw.Route("POST /v1/intents", intake, lambdahost.RouteOptions{Authorizer: authorizer})
	gw.Route("GET /v1/intents/{id}", intake, lambdahost.RouteOptions{Authorizer: authorizer})

	streams, err := lambdahost.NewStreamPoller(lambdahost.StreamPollerConfig{
		DynamoDB:         ddb,
		Streams:          lambdahost.NewStreamsClient(cfg),
		TableName:        "outbox",
		FilterPattern:    dispatcher.StreamFilterPattern,
		StartingPosition: lambdahost.StartLatest,
		Handler:          dispatch,
	})
	if err != nil {
		log.Fatal(err)
	}
	queue, err := lambdahost.NewSQSPoller(lambdahost.SQSPollerConfig{
		Client:   sqs.NewFromConfig(cfg),
		QueueURL: "http://127.0.0.1:9324/000000000000/outbox-retry",
		Handler:  retrier,
	})
	if err != nil {
		log.Fatal(err)
	}
	ticker, err := lambdahost.NewTicker(lambdahost.TickerConfig{Interval: time.Minute, RuleName: "sweeper", Handler: sweeper})
	if err != nil {
		log.Fatal(err)
	}

	for _, s := range []interface{ Start(context.Context) error }{streams, queue, ticker} {
		if err := s.Start(ctx); err != nil {
			log.Fatal(err)
		}
	}
	defer streams.Stop()
	defer queue.Stop()
	defer ticker.Stop()
	_ = gw.ListenAndServe(ctx, "127.0.0.1:8080")

}

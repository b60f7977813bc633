package e2e

import (
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

type typesAV = types.AttributeValue

func strAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func eventBridgeTick() events.EventBridgeEvent {
	return events.EventBridgeEvent{DetailType: "Scheduled Event", Source: "aws.events", Time: time.Now().UTC()}
}

type sqsAttr = sqstypes.QueueAttributeName

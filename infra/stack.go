package infra

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsses"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/dispatcher"
	"github.com/botharness/outbox/adapters/payloads"
	"github.com/botharness/outbox/adapters/wire"
)

// Names shared with the functions (document changes in infra/README.md).
const (
	// GSI1 is the sparse (status, due time) index the sweeper and the admin
	// list query.
	GSI1 = dynamo.StatusIndex
	// GSI2 lists every item of a profile (a bot), keys only, for backups.
	GSI2 = dynamo.ProfileIndex
	// TTLAttribute holds the epoch-seconds expiry of key-retention records.
	TTLAttribute = dynamo.TTLAttribute
	// MetricsNamespace is the Embedded Metric Format namespace the functions
	// emit into, without dimensions.
	MetricsNamespace = "Outbox"
	// MetricNeedsHuman is a count emitted (value 1) whenever an intent enters
	// needs-human.
	MetricNeedsHuman = "NeedsHuman"
	// MetricIntentsNeedingHuman is the gauge the sweeper emits every run: how
	// many intents are in needs-human now. The needs-human alarm watches it.
	MetricIntentsNeedingHuman = "IntentsNeedingHuman"
)

// Environment variable names the functions read.
const (
	EnvTable           = "OUTBOX_TABLE"
	EnvRetryQueueURL   = "OUTBOX_RETRY_QUEUE_URL"
	EnvInboxQueueURL   = "OUTBOX_INBOX_QUEUE_URL"
	EnvBackupBucket    = "OUTBOX_BACKUP_BUCKET"
	EnvBackupKeySecret = "OUTBOX_BACKUP_KEY_SECRET"
	EnvPayloadBucket   = "OUTBOX_PAYLOAD_BUCKET"
	EnvProviderConfig  = "OUTBOX_PROVIDER_CONFIG"
	EnvAttemptPolicy   = wire.EnvAttemptPolicy
	EnvProviderSecrets = "OUTBOX_PROVIDER_SECRETS"
	// EnvSecretUses: which provider secrets a function may read (wire.EnvSecretUses).
	EnvSecretUses = wire.EnvSecretUses
	EnvBotRate    = "OUTBOX_BOT_RATE"
	EnvBotMaxOpen = "OUTBOX_BOT_MAX_OPEN"
	EnvBotLimits  = "OUTBOX_BOT_LIMITS"
	EnvLogLevel   = "LOG_LEVEL"
	// EnvOperatorTopicArn and EnvConsoleURL: operator events (issue 14).
	EnvOperatorTopicArn = "OUTBOX_OPERATOR_TOPIC_ARN"
	EnvConsoleURL       = "OUTBOX_CONSOLE_URL"
)

// Actions per Need. Exported so the tests and the README table agree with
// what the stack grants.
var (
	ActionsTableGet        = []string{"dynamodb:GetItem"}
	ActionsTableRead       = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
	ActionsTableWrite      = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
	ActionsTableBatchWrite = []string{"dynamodb:BatchWriteItem"}
	ActionsTableBatchGet   = []string{"dynamodb:BatchGetItem"} // inline attempts' revalidation (issue 26)
	ActionsIndexQuery      = []string{"dynamodb:Query"}
	ActionsQueueSend       = []string{"sqs:SendMessage"}
	ActionsBucketObjects   = []string{"s3:GetObject", "s3:PutObject"}
	ActionsBucketList      = []string{"s3:ListBucket"}
	ActionsPayloadRead     = []string{"s3:GetObject"}
	ActionsPayloadWrite    = []string{"s3:PutObject"}
	ActionsSecretsRead     = []string{"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
	ActionsLogs            = []string{"logs:CreateLogStream", "logs:PutLogEvents"}
	ActionsTopicPublish    = []string{"sns:Publish"}
)

type outbox struct {
	r       *resolved
	stack   awscdk.Stack
	removal awscdk.RemovalPolicy

	table            awsdynamodb.Table
	retryQueue       awssqs.Queue
	retryDLQ         awssqs.Queue
	inboxQueue       awssqs.Queue
	inboxDLQ         awssqs.Queue
	dispatchFailures awssqs.Queue
	backupBucket     awss3.Bucket
	payloadBucket    awss3.Bucket
	archiveBucket    awss3.Bucket // nil with the archive off (retention.go)
	accessLogsBucket awss3.Bucket
	secrets          []awssecretsmanager.ISecret
	backupKey        awssecretsmanager.Secret
	secretsByName    map[string]awssecretsmanager.ISecret
	alarmTopic       awssns.ITopic
	operatorTopic    awssns.Topic
	// alarmsByID are the alarms by construct id (observability adds the
	// operator-events topic to those that page on-call).
	alarmsByID map[string]awscloudwatch.Alarm

	fns   map[string]awslambda.Function
	roles map[string]awsiam.Role
	api   awsapigatewayv2.HttpApi
}

// NewOutboxStack builds the outbox. It panics on invalid props (the CDK
// convention), naming the field.
func NewOutboxStack(scope constructs.Construct, id string, props *OutboxStackProps) awscdk.Stack {
	if props == nil {
		props = &OutboxStackProps{}
	}
	r := props.resolve()
	sp := r.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("outbox: durable, idempotent external outbox for bots")
	}
	stack := awscdk.NewStack(scope, &id, &sp)
	// Feature flags this stack relies on, set here so `go run ./app`, `cdk
	// synth` and the tests agree whatever cdk.json says.
	stack.Node().SetContext(jsii.String("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"), true)

	o := &outbox{
		r:       r,
		stack:   stack,
		removal: awscdk.RemovalPolicy_RETAIN,
		fns:     map[string]awslambda.Function{},
		roles:   map[string]awsiam.Role{},

		secretsByName: map[string]awssecretsmanager.ISecret{},
	}
	if r.Dev {
		o.removal = awscdk.RemovalPolicy_DESTROY
	}
	awscdk.Tags_Of(stack).Add(jsii.String("project"), jsii.String("outbox"), nil)

	o.data()
	o.retentionData()
	for _, spec := range r.functions {
		o.function(spec)
	}
	o.providerEventTopics()
	o.httpAPI()
	o.alarms()
	o.observability()
	o.outputs()
	o.suppressions()
	o.retentionSuppressions()
	return stack
}

func (o *outbox) data() {
	r, stack := o.r, o.stack
	str := func(n string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(n), Type: awsdynamodb.AttributeType_STRING}
	}
	// The table is built from the adapter's own definition (keys, indexes,
	// projections), so the deployed table cannot drift from what the code queries.
	def := dynamo.TableInput("")
	keys := func(ks []ddbtypes.KeySchemaElement) (pk, sk *awsdynamodb.Attribute) {
		for _, k := range ks {
			if k.KeyType == ddbtypes.KeyTypeHash {
				pk = str(*k.AttributeName)
			} else {
				sk = str(*k.AttributeName)
			}
		}
		return pk, sk
	}
	pk, sk := keys(def.KeySchema)
	o.table = awsdynamodb.NewTable(stack, jsii.String("Table"), &awsdynamodb.TableProps{
		TableName:    r.name("table"),
		PartitionKey: pk,
		SortKey:      sk,
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(TTLAttribute),
		DeletionProtection:  jsii.Bool(!r.Dev),
		RemovalPolicy:       o.removal,
	})
	projections := map[ddbtypes.ProjectionType]awsdynamodb.ProjectionType{
		ddbtypes.ProjectionTypeAll:      awsdynamodb.ProjectionType_ALL,
		ddbtypes.ProjectionTypeKeysOnly: awsdynamodb.ProjectionType_KEYS_ONLY,
	}
	for _, g := range def.GlobalSecondaryIndexes {
		gpk, gsk := keys(g.KeySchema)
		proj, ok := projections[g.Projection.ProjectionType]
		if !ok {
			panic("infra: unsupported projection " + string(g.Projection.ProjectionType))
		}
		o.table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName: g.IndexName, PartitionKey: gpk, SortKey: gsk, ProjectionType: proj,
		})
	}

	fourteenDays := awscdk.Duration_Days(jsii.Number(14))
	queue := func(id, name string, visibility awscdk.Duration, dlq awssqs.IQueue) awssqs.Queue {
		qp := &awssqs.QueueProps{
			QueueName:       r.name(name),
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			EnforceSSL:      jsii.Bool(true),
			RetentionPeriod: fourteenDays,
		}
		if visibility != nil {
			qp.VisibilityTimeout = visibility
		}
		if dlq != nil {
			qp.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(r.RetryMaxReceiveCount)}
		}
		return awssqs.NewQueue(stack, jsii.String(id), qp)
	}
	// The event source mapping keeps a message invisible for the function
	// timeout per attempt; AWS asks for >= 6x so retries of a throttled
	// batch do not re-deliver it while it is still being processed.
	o.retryDLQ = queue("RetryDLQ", "retry-dlq", nil, nil)
	o.retryQueue = queue("RetryQueue", "retry", awscdk.Duration_Seconds(jsii.Number(6*o.maxTimeout(TriggerRetryQueue).Seconds())), o.retryDLQ)
	o.inboxDLQ = queue("InboxDLQ", "inbox-dlq", nil, nil)
	o.inboxQueue = queue("InboxQueue", "inbox", nil, o.inboxDLQ)
	o.dispatchFailures = queue("DispatchFailures", "dispatch-failures", nil, nil)

	lp := o.bucketProps()
	lp.LifecycleRules = &[]*awss3.LifecycleRule{{Expiration: awscdk.Duration_Days(jsii.Number(365))}}
	o.accessLogsBucket = awss3.NewBucket(stack, jsii.String("AccessLogsBucket"), lp)
	bp := o.loggedBucketProps("backup-bucket/")
	bp.Versioned = jsii.Bool(true)
	bp.LifecycleRules = &[]*awss3.LifecycleRule{{
		NoncurrentVersionExpiration:         awscdk.Duration_Days(jsii.Number(90)),
		AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(7)),
	}}
	o.backupBucket = awss3.NewBucket(stack, jsii.String("BackupBucket"), bp)
	// Claim-checked payloads: content-addressed objects under payloads/,
	// expired PayloadRetentionDays after their last put (intake puts again
	// for every intent that carries the same bytes, which renews it).
	pp := o.loggedBucketProps("payload-bucket/")
	pp.LifecycleRules = expiringUnder("expire-payloads", payloads.Prefix, r.PayloadRetentionDays)
	o.payloadBucket = awss3.NewBucket(stack, jsii.String("PayloadBucket"), pp)

	// Operator events: one message per needs-human episode (and per failed or
	// expired end); email, Slack (via Chatbot) or a pager subscribe to it.
	o.operatorTopic = awssns.NewTopic(stack, jsii.String("OperatorEventsTopic"), &awssns.TopicProps{
		TopicName:   r.name("operator-events"),
		DisplayName: jsii.String("Outbox operator events"),
		EnforceSSL:  jsii.Bool(true),
	})

	// The backup signing key (HMAC-SHA256 over each manifest): generated
	// here, read by the functions that back up and restore, never in the
	// template or an environment (docs/decisions.md "Backup and restore").
	o.backupKey = awssecretsmanager.NewSecret(stack, jsii.String("BackupKey"), &awssecretsmanager.SecretProps{
		SecretName:  r.name("backup-key"),
		Description: jsii.String("outbox backup manifest signing key (HMAC-SHA256); rotating it makes older snapshots unrestorable"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
		},
		RemovalPolicy: o.removal,
	})
	for _, n := range r.ProviderSecretNames {
		o.secrets = append(o.secrets, o.importSecret(n))
	}
}

// importSecret imports a Secrets Manager secret by name or complete ARN,
// once per name. The stack never creates secrets: their values must never
// be in a template.
func (o *outbox) importSecret(name string) awssecretsmanager.ISecret {
	if s, ok := o.secretsByName[name]; ok {
		return s
	}
	id := jsii.String(fmt.Sprintf("ProviderSecret%d", len(o.secretsByName)))
	var s awssecretsmanager.ISecret
	if strings.HasPrefix(name, "arn:") {
		s = awssecretsmanager.Secret_FromSecretCompleteArn(o.stack, id, jsii.String(name))
	} else {
		s = awssecretsmanager.Secret_FromSecretNameV2(o.stack, id, jsii.String(name))
	}
	o.secretsByName[name] = s
	return s
}

// grantSecrets lets the role read the secrets (GetSecretValue,
// DescribeSecret; an imported-by-name secret's ARN ends in a random
// six-character suffix, which the grant matches with "-??????").
func (o *outbox) grantSecrets(role awsiam.Role, names []string) {
	for _, n := range names {
		o.importSecret(n).GrantRead(role, nil)
	}
}

// grantAWS gives the role the IAM statements the configured AWS-service
// providers declare for the use (SES: ses:SendEmail on the sending
// identities and configuration sets, for the functions that send).
func (o *outbox) grantAWS(role awsiam.Role, use wire.SecretUse) {
	for _, g := range o.r.awsGrants {
		if g.Use != use {
			continue
		}
		var res []*string
		for _, a := range g.Resources {
			region := a.Region
			if region == "" {
				region = *awscdk.Aws_REGION()
			}
			res = append(res, jsii.String("arn:"+*awscdk.Aws_PARTITION()+":"+a.Service+":"+region+":"+*awscdk.Aws_ACCOUNT_ID()+":"+a.Resource))
		}
		role.AddToPrincipalPolicy(allow(g.Actions, res...))
	}
}

// providerEventTopics builds, for each event topic the configured providers
// declare, an SNS topic (TLS enforced) the functions with
// NeedProviderEvents subscribe to, and for an SES configuration set its
// event destination publishing to the topic, with a topic policy letting
// only SES publish, for that configuration set in this account.
func (o *outbox) providerEventTopics() {
	for _, et := range o.r.eventTopics {
		id := pascal(et.ID)
		topic := awssns.NewTopic(o.stack, jsii.String(id+"EventsTopic"), &awssns.TopicProps{
			TopicName:   o.r.name(et.ID + "-events"),
			DisplayName: jsii.String("Outbox provider events: " + et.ID),
			EnforceSSL:  jsii.Bool(true),
		})
		for _, s := range o.r.functions {
			if s.Needs.Has(NeedProviderEvents) && o.fns[s.Name] != nil {
				topic.AddSubscription(awssnssubscriptions.NewLambdaSubscription(o.fns[s.Name], nil))
			}
		}
		if et.SESConfigurationSet == "" {
			continue
		}
		setArn := "arn:" + *awscdk.Aws_PARTITION() + ":ses:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":configuration-set/" + et.SESConfigurationSet
		topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Effect:     awsiam.Effect_ALLOW,
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("ses.amazonaws.com"), nil)},
			Actions:    jsii.Strings("sns:Publish"),
			Resources:  &[]*string{topic.TopicArn()},
			Conditions: &map[string]any{
				"StringEquals": map[string]any{"AWS:SourceAccount": awscdk.Aws_ACCOUNT_ID()},
				"ArnLike":      map[string]any{"AWS:SourceArn": setArn},
			},
		}))
		awsses.NewCfnConfigurationSetEventDestination(o.stack, jsii.String(id+"EventDestination"), &awsses.CfnConfigurationSetEventDestinationProps{
			ConfigurationSetName: jsii.String(et.SESConfigurationSet),
			EventDestination: &awsses.CfnConfigurationSetEventDestination_EventDestinationProperty{
				Name:               o.r.name(et.ID + "-to-sns"),
				Enabled:            jsii.Bool(true),
				MatchingEventTypes: jsii.Strings(lower(et.EventTypes)...),
				SnsDestination:     &awsses.CfnConfigurationSetEventDestination_SnsDestinationProperty{TopicArn: topic.TopicArn()},
			},
		})
	}
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

// secretUses is OUTBOX_SECRET_USES for a function: the uses whose secrets
// it may read ("none" when it reads none).
func secretUses(n Need) string {
	var uses []string
	if n.Has(NeedSendSecrets) {
		uses = append(uses, string(wire.SecretForSending))
	}
	if n.Has(NeedProviderSecrets) {
		uses = append(uses, string(wire.SecretForVerifying))
	}
	if len(uses) == 0 {
		return "none"
	}
	return strings.Join(uses, ",")
}

// maxTimeout is the longest timeout among functions with the trigger (60 s
// if none).
func (o *outbox) maxTimeout(t Trigger) time.Duration {
	d := time.Duration(0)
	for _, f := range o.r.functions {
		if f.Trigger == t && f.Timeout > d {
			d = f.Timeout
		}
	}
	if d == 0 {
		d = 60 * time.Second
	}
	return d
}

func allow(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}

func (o *outbox) function(spec FunctionSpec) {
	r, stack := o.r, o.stack
	id := pascal(spec.Name)
	fnName := r.name(spec.Name)

	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + *fnName),
		Retention:     r.LogRetention,
		RemovalPolicy: o.removal,
	})
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("outbox " + spec.Name + " function: least privilege, see infra/README.md"),
	})
	role.AddToPrincipalPolicy(allow(ActionsLogs, logs.LogGroupArn()))

	env := map[string]*string{EnvLogLevel: jsii.String(r.LogLevel)}
	n := spec.Needs
	tableArn := o.table.TableArn()
	var tableActions []string
	if n.Has(NeedTableGet) {
		tableActions = append(tableActions, ActionsTableGet...)
	}
	if n.Has(NeedTableRead) {
		tableActions = append(tableActions, ActionsTableRead...)
	}
	if n.Has(NeedTableWrite) {
		tableActions = append(tableActions, ActionsTableWrite...)
	}
	if n.Has(NeedTableBatchWrite) {
		tableActions = append(tableActions, ActionsTableBatchWrite...)
	}
	if n.Has(NeedTableBatchGet) {
		tableActions = append(tableActions, ActionsTableBatchGet...)
	}
	if len(tableActions) > 0 {
		role.AddToPrincipalPolicy(allow(dedupe(tableActions), tableArn))
	}
	if n.Has(NeedIndexQuery) {
		role.AddToPrincipalPolicy(allow(ActionsIndexQuery, jsii.String(*tableArn+"/index/"+GSI1)))
	}
	if n.Has(NeedBackupProfile) {
		role.AddToPrincipalPolicy(allow(ActionsIndexQuery, jsii.String(*tableArn+"/index/"+GSI2)))
	}
	if len(tableActions) > 0 || n.Has(NeedIndexQuery) {
		env[EnvTable] = o.table.TableName()
	}
	if n.Has(NeedRetryQueueSend) {
		role.AddToPrincipalPolicy(allow(ActionsQueueSend, o.retryQueue.QueueArn()))
		env[EnvRetryQueueURL] = o.retryQueue.QueueUrl()
	}
	if n.Has(NeedInboxQueueSend) {
		role.AddToPrincipalPolicy(allow(ActionsQueueSend, o.inboxQueue.QueueArn()))
		env[EnvInboxQueueURL] = o.inboxQueue.QueueUrl()
	}
	if n.Has(NeedBackupBucket) {
		role.AddToPrincipalPolicy(allow(ActionsBucketObjects, o.backupBucket.ArnForObjects(jsii.String(backup.Prefix+"*"))))
		role.AddToPrincipalPolicy(allow(ActionsBucketList, o.backupBucket.BucketArn()))
		env[EnvBackupBucket] = o.backupBucket.BucketName()
		role.AddToPrincipalPolicy(allow(ActionsSecretsRead, o.backupKey.SecretArn()))
		env[EnvBackupKeySecret] = o.backupKey.SecretName()
	}
	payloadObjects := o.payloadBucket.ArnForObjects(jsii.String(payloads.Prefix + "*"))
	if n.Has(NeedPayloadRead) {
		role.AddToPrincipalPolicy(allow(ActionsPayloadRead, payloadObjects))
		env[EnvPayloadBucket] = o.payloadBucket.BucketName()
	}
	if n.Has(NeedPayloadWrite) {
		role.AddToPrincipalPolicy(allow(ActionsPayloadWrite, payloadObjects))
		env[EnvPayloadBucket] = o.payloadBucket.BucketName()
	}
	if n.Has(NeedProviderConfig) {
		env[EnvProviderConfig] = jsii.String(r.ProviderConfig)
		if strings.TrimSpace(r.AttemptPolicy) != "" {
			env[EnvAttemptPolicy] = jsii.String(r.AttemptPolicy)
		}
		env[EnvSecretUses] = jsii.String(secretUses(n))
	}
	if n.Has(NeedSendSecrets) {
		o.grantSecrets(role, r.secretRefs[wire.SecretForSending])
		o.grantAWS(role, wire.SecretForSending)
	}
	if n.Has(NeedBotLimits) {
		for k, v := range map[string]string{EnvBotRate: r.BotRate, EnvBotLimits: r.BotLimits} {
			if strings.TrimSpace(v) != "" {
				env[k] = jsii.String(v)
			}
		}
		if r.BotMaxOpen > 0 {
			env[EnvBotMaxOpen] = jsii.String(strconv.Itoa(int(r.BotMaxOpen)))
		}
	}
	if n.Has(NeedOperatorEvents) {
		role.AddToPrincipalPolicy(allow(ActionsTopicPublish, o.operatorTopic.TopicArn()))
		env[EnvOperatorTopicArn] = o.operatorTopic.TopicArn()
	}
	if n.Has(NeedProviderSecrets) {
		for _, sec := range o.secrets {
			sec.GrantRead(role, nil)
		}
		o.grantSecrets(role, r.secretRefs[wire.SecretForVerifying])
		o.grantAWS(role, wire.SecretForVerifying)
		env[EnvProviderSecrets] = jsii.String(strings.Join(r.ProviderSecretNames, ","))
	}
	o.retentionAccess(spec, role, env)

	arch := awslambda.Architecture_ARM_64()
	if r.Architecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	fn := awslambda.NewFunction(stack, jsii.String(id+"Function"), &awslambda.FunctionProps{
		FunctionName: fnName,
		Description:  jsii.String(spec.Description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: arch,
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(r.AssetDir, spec.Name)), nil),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(spec.Timeout.Seconds())),
		MemorySize:   jsii.Number(spec.MemoryMB),
		Role:         role,
		LogGroup:     logs,
		Environment:  &env,
		// X-Ray active tracing (issue 30); the functions' own spans go by
		// OTLP where OTEL_EXPORTER_OTLP_ENDPOINT is set (adapters/tracing).
		Tracing: awslambda.Tracing_ACTIVE,
	})
	o.fns[spec.Name] = fn
	o.roles[spec.Name] = role

	switch spec.Trigger {
	case TriggerStream:
		// The filter is the same constant the local host applies, so the
		// deployed mapping and `make run` select exactly the same records.
		pattern := dispatcher.StreamFilterPattern
		if spec.StreamFilter != "" {
			pattern = spec.StreamFilter
		}
		batch, window := r.DispatcherBatchSize, r.DispatcherMaxBatchingWindowSeconds
		if spec.StreamBatchSize > 0 {
			batch, window = spec.StreamBatchSize, spec.StreamBatchingWindowSeconds
		}
		fn.AddEventSource(awslambdaeventsources.NewDynamoEventSource(o.table, &awslambdaeventsources.DynamoEventSourceProps{
			StartingPosition:        awslambda.StartingPosition_LATEST,
			BatchSize:               jsii.Number(batch),
			ParallelizationFactor:   jsii.Number(r.DispatcherParallelizationFactor),
			MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(window)),
			BisectBatchOnError:      jsii.Bool(true),
			RetryAttempts:           jsii.Number(r.DispatcherRetryAttempts),
			MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(r.DispatcherMaxRecordAgeSeconds)),
			ReportBatchItemFailures: jsii.Bool(true),
			OnFailure:               awslambdaeventsources.NewSqsDlq(o.dispatchFailures),
			Filters: &[]*map[string]interface{}{
				{"pattern": jsii.String(pattern)},
			},
		}))
	case TriggerRetryQueue:
		fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(o.retryQueue, &awslambdaeventsources.SqsEventSourceProps{
			BatchSize:               jsii.Number(r.RetrierBatchSize),
			MaxConcurrency:          jsii.Number(r.RetrierMaxConcurrency),
			ReportBatchItemFailures: jsii.Bool(true),
		}))
	case TriggerSchedule:
		// A failed or throttled sweep is not retried: the next tick is a
		// minute away and two overlapping sweeps only waste writes.
		fn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
		})
		awsevents.NewRule(stack, jsii.String(id+"Schedule"), &awsevents.RuleProps{
			RuleName:    r.name(spec.Name + "-schedule"),
			Description: jsii.String("runs the outbox " + spec.Name + " every minute"),
			Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
			Targets: &[]awsevents.IRuleTarget{
				awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
					RetryAttempts: jsii.Number(0),
					MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(60)),
				}),
			},
		})
	}
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// accessLogFormat is one JSON object per request. It never logs headers,
// so bearer tokens and webhook signatures stay out of the logs.
const accessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",` +
	`"requestTime":"$context.requestTime","routeKey":"$context.routeKey","status":"$context.status",` +
	`"protocol":"$context.protocol","responseLength":"$context.responseLength",` +
	`"latencyMs":"$context.responseLatency","integrationStatus":"$context.integrationStatus",` +
	`"integrationError":"$context.integrationErrorMessage","authorizerError":"$context.authorizer.error"}`

func (o *outbox) httpAPI() {
	r, stack := o.r, o.stack
	hasRoutes := false
	for _, s := range r.functions {
		hasRoutes = hasRoutes || len(s.Routes) > 0 || len(s.PublicRoutes) > 0
	}
	if !hasRoutes || r.NoHTTPAPI {
		return
	}
	o.api = awsapigatewayv2.NewHttpApi(stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:            r.name("api"),
		Description:        jsii.String("outbox: intents, admin, provider webhooks"),
		CreateDefaultStage: jsii.Bool(false),
	})
	accessLogs := awslogs.NewLogGroup(stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     r.LogRetention,
		RemovalPolicy: o.removal,
	})
	stage := awsapigatewayv2.NewHttpStage(stack, jsii.String("ApiDefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    o.api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(r.APIRateLimit),
			BurstLimit: jsii.Number(r.APIBurstLimit),
		},
	})
	// The L2's accessLogSettings takes a jsii interface; the L1 property is
	// the same thing without a Go implementation of it.
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat),
	})

	var authorizer awsapigatewayv2.IHttpRouteAuthorizer
	for _, s := range r.functions {
		if s.Trigger == TriggerAuthorizer {
			authorizer = awsapigatewayv2authorizers.NewHttpLambdaAuthorizer(jsii.String("BearerAuthorizer"), o.fns[s.Name],
				&awsapigatewayv2authorizers.HttpLambdaAuthorizerProps{
					AuthorizerName: r.name("authorizer"),
					ResponseTypes:  &[]awsapigatewayv2authorizers.HttpLambdaResponseType{awsapigatewayv2authorizers.HttpLambdaResponseType_SIMPLE},
					IdentitySource: jsii.Strings("$request.header.Authorization"),
					// Uncached: a revoked token or grant takes effect on the
					// next request.
					ResultsCacheTtl: awscdk.Duration_Seconds(jsii.Number(0)),
				})
		}
	}
	var grouped []groupedRoute
	for _, s := range r.functions {
		if s.Needs.Has(NeedOperatorEvents) {
			// Links in operator events open the console on this API.
			o.fns[s.Name].AddEnvironment(jsii.String(EnvConsoleURL), jsii.String(*o.api.ApiEndpoint()+"/console"), nil)
		}
		o.apiURLEnv(s)
		if len(s.Routes) == 0 && len(s.PublicRoutes) == 0 {
			continue
		}
		auth := authorizer
		if s.Public {
			auth = awsapigatewayv2.NewHttpNoneAuthorizer()
		} else if auth == nil {
			panic(fmt.Sprintf("infra: function %s has authorized routes but no function has TriggerAuthorizer", s.Name))
		}
		integ := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(pascal(s.Name)+"Integration"), o.fns[s.Name], nil)
		for _, rt := range s.Routes {
			routes := o.api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
				Path:        jsii.String(rt.Path),
				Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(rt.Method)},
				Integration: integ,
				Authorizer:  auth,
			})
			for _, route := range *routes {
				grouped = append(grouped, groupedRoute{key: rt.Key(), group: s.RouteGroup, route: route})
			}
			if s.Public {
				for _, route := range *routes {
					suppress(route, "AwsSolutions-APIG4",
						"Provider webhook route: providers cannot send our bearer token; the function verifies each provider's request signature (Standard Webhooks / Slack signing secret / Telegram secret token) before storing anything.")
				}
			}
		}
		for _, rt := range s.PublicRoutes {
			var routes *[]awsapigatewayv2.HttpRoute
			if rt == DefaultRoute {
				routes = &[]awsapigatewayv2.HttpRoute{awsapigatewayv2.NewHttpRoute(stack, jsii.String("DefaultRoute"), &awsapigatewayv2.HttpRouteProps{
					HttpApi:     o.api,
					RouteKey:    awsapigatewayv2.HttpRouteKey_DEFAULT(),
					Integration: integ,
					Authorizer:  awsapigatewayv2.NewHttpNoneAuthorizer(),
				})}
			} else {
				routes = o.api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
					Path:        jsii.String(rt.Path),
					Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(rt.Method)},
					Integration: integ,
					Authorizer:  awsapigatewayv2.NewHttpNoneAuthorizer(),
				})
			}
			for _, route := range *routes {
				grouped = append(grouped, groupedRoute{key: rt.Key(), group: RouteGroupPublic, route: route})
			}
			reason := "The OpenAPI document is public by design (integrators read it before they hold a token); it carries no data."
			if strings.HasPrefix(rt.Path, "/console") || rt == DefaultRoute {
				reason = "The operators' console: static HTML/CSS/JS embedded in the admin function, holding no data and no secret. Every API call the page makes carries the operator's bearer token and goes through the Lambda authorizer."
			}
			for _, route := range *routes {
				suppress(route, "AwsSolutions-APIG4", reason)
			}
		}
	}
	o.throttleRouteGroups(stage, grouped)
}

func (o *outbox) alarms() {
	r, stack := o.r, o.stack
	if r.AlarmTopicArn != "" {
		o.alarmTopic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(r.AlarmTopicArn))
	} else {
		o.alarmTopic = awssns.NewTopic(stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
			TopicName:  r.name("alarms"),
			EnforceSSL: jsii.Bool(true),
		})
	}
	action := awscloudwatchactions.NewSnsAction(o.alarmTopic)
	o.alarmsByID = map[string]awscloudwatch.Alarm{}
	alarm := func(id, name, desc string, metric awscloudwatch.IMetric, threshold, periods float64) {
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          r.name(name),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		o.alarmsByID[id] = a
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	fiveMinutes := awscdk.Duration_Minutes(jsii.Number(5))

	for _, q := range []struct {
		id, name string
		q        awssqs.Queue
		desc     string
	}{
		{"RetryDLQDepthAlarm", "retry-dlq-depth", o.retryDLQ, "Retry messages failed the retrier 5 times; the intents are still in the table (the sweeper re-enqueues due retries). Inspect and redrive."},
		{"InboxDLQDepthAlarm", "inbox-dlq-depth", o.inboxDLQ, "Inbound events the bot's inbox consumer could not process."},
		{"DispatchFailuresDepthAlarm", "dispatch-failures-depth", o.dispatchFailures, "Stream batches the dispatcher or the notifier could not process within their retry/age bounds; the intents are still in the table (pending ones are swept, unpublished operator events are redriven by the sweeper)."},
	} {
		alarm(q.id, q.name, q.desc, q.q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period:    minute,
			Statistic: jsii.String("Maximum"),
		}), 0, 1)
	}

	alarm("NeedsHumanAlarm", "needs-human", "Intents are waiting in needs-human for an operator decision (gauge emitted by the sweeper). Use the admin API.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:  jsii.String(MetricsNamespace),
			MetricName: jsii.String(MetricIntentsNeedingHuman),
			Statistic:  jsii.String("Maximum"),
			Period:     fiveMinutes,
		}), 0, 1)

	for _, s := range r.functions {
		fn := o.fns[s.Name]
		alarm(pascal(s.Name)+"ErrorsAlarm", s.Name+"-errors", "The "+s.Name+" function returned errors (invocation failures, timeouts, crashes).",
			fn.MetricErrors(&awscloudwatch.MetricOptions{Period: fiveMinutes, Statistic: jsii.String("Sum")}), 0, 1)
		if s.Trigger == TriggerStream {
			alarm(pascal(s.Name)+"IteratorAgeAlarm", s.Name+"-iterator-age", "The "+s.Name+" is more than 60 s behind the table stream.",
				fn.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}), 60000, 3)
		}
	}
}

func (o *outbox) outputs() {
	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(o.stack, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	if o.api != nil {
		out("ApiUrl", o.api.ApiEndpoint(), "HTTP API base URL")
	}
	out("TableName", o.table.TableName(), "DynamoDB table")
	out("RetryQueueUrl", o.retryQueue.QueueUrl(), "retry queue")
	out("InboxQueueUrl", o.inboxQueue.QueueUrl(), "bot inbox queue (inbound provider events)")
	out("DispatchFailuresQueueUrl", o.dispatchFailures.QueueUrl(), "stream records the dispatcher gave up on")
	out("BackupBucketName", o.backupBucket.BucketName(), "profile backups")
	out("PayloadBucketName", o.payloadBucket.BucketName(), "claim-checked intent payloads (over 4 KiB)")
	out("AlarmTopicArn", o.alarmTopic.TopicArn(), "alarm notifications")
	out("OperatorEventsTopicArn", o.operatorTopic.TopicArn(), "operator events: one per needs-human episode and per failed/expired end (subscribe email, Slack, a pager)")
	if o.api != nil {
		out("ConsoleUrl", jsii.String(*o.api.ApiEndpoint()+"/console"), "the operators' web console")
	}
}

// bucketProps is what every bucket of the stack starts from: S3-managed
// encryption, no public access, TLS 1.2 only, owner-enforced objects.
func (o *outbox) bucketProps() *awss3.BucketProps {
	return &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     o.removal,
	}
}

// loggedBucketProps is bucketProps with server access logs to the access
// logs bucket under logPrefix.
func (o *outbox) loggedBucketProps(logPrefix string) *awss3.BucketProps {
	p := o.bucketProps()
	p.ServerAccessLogsBucket = o.accessLogsBucket
	p.ServerAccessLogsPrefix = jsii.String(logPrefix)
	return p
}

// expiringUnder is the lifecycle rule id expiring the objects under prefix
// days after their last put (incomplete uploads after a day).
func expiringUnder(id, prefix string, days float64) *[]*awss3.LifecycleRule {
	return &[]*awss3.LifecycleRule{{
		Id:                                  jsii.String(id),
		Prefix:                              jsii.String(prefix),
		Expiration:                          awscdk.Duration_Days(jsii.Number(days)),
		AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
	}}
}

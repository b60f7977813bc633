package infra

import (
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"
)

// Metrics the functions emit as EMF (adapters/emf, namespace Outbox) that
// the dashboard and the paging alarms read. All are dimensionless except
// AttemptLatency (dimension Provider).
const (
	// MetricDelivered counts attempts that succeeded (core: Attempt_<result>).
	MetricDelivered = "Attempt_succeeded"
	// MetricRetriedTransient and MetricRetriedRateLimited count attempts that
	// failed with proof of no effect (retried).
	MetricRetriedTransient   = "Attempt_transient"
	MetricRetriedRateLimited = "Attempt_rate-limited"
	// MetricUnknownOutcome counts attempts with an unknown outcome.
	MetricUnknownOutcome = "Attempt_unknown-outcome"
	// MetricIntentsAccepted counts new intents the intake answered 201.
	MetricIntentsAccepted = "IntentsAccepted"
	// MetricAttemptLatency is each attempt's latency in ms, by Provider.
	MetricAttemptLatency = "AttemptLatency"
	// MetricNeedsHumanOldestAge is the sweeper's gauge of the longest
	// needs-human wait, in seconds.
	MetricNeedsHumanOldestAge = "NeedsHumanOldestAgeSeconds"
	// MetricBreakerOpened counts circuit breakers opening (notify.OperatorNotifier
	// counts every operator event under its type).
	MetricBreakerOpened = "breaker_opened"
	// MetricAccountPaused counts 429 pauses.
	MetricAccountPaused = "AccountPaused"
)

// Paging alarms' thresholds (docs/decisions.md, "Observability").
const (
	// NeedsHumanOldestAgeThreshold: a person has waited over an hour.
	NeedsHumanOldestAgeThreshold = 3600
	// WorkQueueAgeThreshold: the oldest work/retry message is over 30 min
	// old, twice SQS's longest delay (900 s), so a delayed retry never trips it.
	WorkQueueAgeThreshold = 1800
	// StallPeriods: intake accepted intents and nothing was delivered in
	// each of this many consecutive 5-minute periods.
	StallPeriods = 2
)

// observability builds the CloudWatch dashboard from the EMF metrics and
// the alarms that page on-call through the operator-events topic: the
// needs-human wait, a silent stall (intake accepting while nothing is
// delivered, metric math), the work queue's age, and — besides their alarm
// topic — the DLQ-depth and stream iterator-age alarms.
func (o *outbox) observability() {
	r, stack := o.r, o.stack
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	fiveMinutes := awscdk.Duration_Minutes(jsii.Number(5))
	emf := func(name, stat, label string, period awscdk.Duration) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(name),
			Statistic: jsii.String(stat), Period: period, Label: jsii.String(label)})
	}
	page := awscloudwatchactions.NewSnsAction(o.operatorTopic)
	var paging []interfacesawscloudwatch.IAlarmRef
	alarm := func(id, name, desc string, metric awscloudwatch.IMetric, threshold, periods float64) awscloudwatch.Alarm {
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName: r.name(name), AlarmDescription: jsii.String(desc), Metric: metric,
			Threshold: jsii.Number(threshold), EvaluationPeriods: jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(page)
		paging = append(paging, a)
		return a
	}

	alarm("NeedsHumanOldestAgeAlarm", "needs-human-oldest-age",
		"An intent has waited over an hour in needs-human for an operator decision (gauge emitted by the sweeper). Open the console's overview.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(MetricNeedsHumanOldestAge),
			Statistic: jsii.String("Maximum"), Period: fiveMinutes}), NeedsHumanOldestAgeThreshold, 1)

	accepted := emf(MetricIntentsAccepted, "Sum", "accepted", fiveMinutes)
	delivered := emf(MetricDelivered, "Sum", "delivered", fiveMinutes)
	stall := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("IF(FILL(accepted, 0) > 0 AND FILL(delivered, 0) == 0, 1, 0)"),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"accepted": accepted, "delivered": delivered},
		Label:        jsii.String("accepting while nothing is delivered"),
		Period:       fiveMinutes,
	})
	alarm("SilentStallAlarm", "silent-stall",
		"Intake accepted intents while nothing was delivered for 10 minutes: dispatch is stalled (stream, work queue, provider or gate). Check the dashboard.",
		stall, 0, StallPeriods)

	alarm("WorkQueueAgeAlarm", "work-queue-age",
		"The oldest message in the work/retry queue is over 30 minutes old: the retrier is not keeping up or is failing.",
		o.retryQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
		WorkQueueAgeThreshold, 5)

	// The DLQ-depth and iterator-age alarms page through the same topic.
	ids := make([]string, 0, len(o.alarmsByID))
	for id := range o.alarmsByID {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a deterministic template
	for _, id := range ids {
		if strings.HasSuffix(id, "DepthAlarm") || strings.HasSuffix(id, "IteratorAgeAlarm") {
			o.alarmsByID[id].AddAlarmAction(page)
			paging = append(paging, o.alarmsByID[id])
		}
	}

	// The dashboard.
	perMinute := func(name, label string) awscloudwatch.IMetric { return emf(name, "Sum", label, minute) }
	graph := func(title string, left []awscloudwatch.IMetric, width float64) awscloudwatch.GraphWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &left,
			Width: jsii.Number(width), Height: jsii.Number(6)})
	}
	latency := func(stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewSearchExpression(&awscloudwatch.SearchExpressionProps{
			Expression: jsii.String("SEARCH('{" + MetricsNamespace + ",Provider} MetricName=\"" + MetricAttemptLatency + "\"', '" + stat + "', 60)"),
			Label:      jsii.String(stat),
			Period:     minute,
		})
	}
	var iterators []awscloudwatch.IMetric
	for _, s := range r.functions {
		if s.Trigger == TriggerStream {
			iterators = append(iterators, o.fns[s.Name].Metric(jsii.String("IteratorAge"),
				&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(s.Name)}))
		}
	}
	depth := func(label string, q interface {
		MetricApproximateNumberOfMessagesVisible(*awscloudwatch.MetricOptions) awscloudwatch.Metric
	}) awscloudwatch.IMetric {
		return q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(label)})
	}
	awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   r.name("overview"),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Attempts per minute: delivered, retried, unknown, needs-human", []awscloudwatch.IMetric{
					perMinute(MetricDelivered, "delivered"), perMinute(MetricRetriedTransient, "retried (transient)"),
					perMinute(MetricRetriedRateLimited, "retried (429)"), perMinute(MetricUnknownOutcome, "unknown outcome"),
					perMinute(MetricNeedsHuman, "needs-human"), perMinute(MetricIntentsAccepted, "accepted (intake)"),
				}, 12),
				graph("Attempt latency by provider (ms): p50 and p99", []awscloudwatch.IMetric{latency("p50"), latency("p99")}, 12),
			},
			{
				graph("Needs-human backlog and oldest wait", []awscloudwatch.IMetric{
					emf(MetricIntentsNeedingHuman, "Maximum", "needs-human intents", minute),
					emf(MetricNeedsHumanOldestAge, "Maximum", "oldest wait (s)", minute),
				}, 8),
				graph("Breaker opens and 429 pauses", []awscloudwatch.IMetric{
					perMinute(MetricBreakerOpened, "breaker opened"), perMinute(MetricAccountPaused, "account paused (429)"),
				}, 8),
				graph("Dead-letter depth", []awscloudwatch.IMetric{
					depth("retry DLQ", o.retryDLQ), depth("inbox DLQ", o.inboxDLQ), depth("dispatch failures", o.dispatchFailures),
				}, 8),
			},
			{
				graph("Stream iterator age (ms)", iterators, 8),
				graph("Work queue: oldest message age (s)", []awscloudwatch.IMetric{
					o.retryQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String("oldest message")}),
				}, 8),
				awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{Title: jsii.String("Paging alarms"), Alarms: &paging,
					Width: jsii.Number(8), Height: jsii.Number(6)}),
			},
		},
	})
}

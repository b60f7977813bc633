package idlecost

import (
	"math"
	"os"
	"strings"
	"testing"
)

// A hand-made template with one of everything the idle bill counts, priced
// with round numbers; every expected figure is worked out by hand below.
const testTemplate = `{"Resources": {
  "A1": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Period": 60, "MetricName": "x"}},
  "A2": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Period": 300, "MetricName": "y"}},
  "A3": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Period": 10, "MetricName": "z"}},
  "Math": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"Metrics": [
    {"Id": "e", "Expression": "IF(a > 0 AND b == 0, 1, 0)"},
    {"Id": "a", "MetricStat": {"Period": 300}, "ReturnData": false},
    {"Id": "b", "MetricStat": {"Period": 300}, "ReturnData": false}]}},
  "Dash": {"Type": "AWS::CloudWatch::Dashboard", "Properties": {}},
  "Key": {"Type": "AWS::SecretsManager::Secret", "Properties": {"Name": "outbox-backup-key"}},
  "Cmk": {"Type": "AWS::KMS::Key", "Properties": {}},
  "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": true}}},
  "Q": {"Type": "AWS::SQS::Queue", "Properties": {}},
  "Sweeper": {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": "outbox-sweeper", "MemorySize": 256,
    "TracingConfig": {"Mode": "Active"}, "Environment": {"Variables": {"OUTBOX_PROVIDER_CONFIG": "{}"}}}},
  "Webhook": {"Type": "AWS::Lambda::Function", "Properties": {"MemorySize": 256, "Environment": {"Variables": {
    "OUTBOX_PROVIDER_SECRETS": "outbox/provider-secrets,outbox-backup-key",
    "OUTBOX_PROVIDER_CONFIG": "{\"slack\":{\"accounts\":{\"T1\":{\"token\":\"secretsmanager:dev/slack#token\",\"signingSecret\":\"secretsmanager:dev/slack#signing\"}}}}"}}}},
  "Rule": {"Type": "AWS::Events::Rule", "Properties": {"ScheduleExpression": "rate(5 minutes)", "State": "ENABLED",
    "Targets": [{"Arn": {"Fn::GetAtt": ["Sweeper", "Arn"]}, "Id": "T"}]}},
  "QueueMapping": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Q", "Arn"]}}},
  "StreamMapping": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Table", "StreamArn"]}}}
}}`

func testPrices() Prices {
	return Prices{Date: "test", Region: "test", LambdaMemoryMB: 256, USD: map[string]float64{
		"cloudwatch_alarm_metric_month": 0.1, "cloudwatch_alarm_metric_month_high_resolution": 0.3,
		"cloudwatch_composite_alarm_month": 0.5, "cloudwatch_dashboard_month": 3, "cloudwatch_custom_metric_month": 0.3,
		"cloudwatch_logs_ingested_gb": 0.5, "secretsmanager_secret_month": 0.4, "kms_key_month": 1,
		"dynamodb_pitr_gb_month": 0.2, "dynamodb_storage_gb_month": 0.25, "xray_trace_recorded": 0.000005,
		"lambda_request": 0.0000002, "lambda_gb_second_arm64": 0.00001, "sqs_request": 0.0000004,
		"dynamodb_read_request_unit": 0.000000125, "dynamodb_write_request_unit": 0.000000625,
	}, Idle: Assumptions{HoursPerMonth: 730, SQSIdleReceivesPerMinute: 15, LambdaPlatformLogBytes: 350, TableGB: 2,
		Sweep: Sweep{RRU: 100, WRU: 1, BilledMS: 200, MetricBytes: 650, MetricNames: []string{"A", "B"}, From: "test"}}}
}

func TestComputeItemByItem(t *testing.T) {
	rep, err := Compute([]byte(testTemplate), testPrices())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Item{}
	for _, it := range rep.Items {
		got[it.Item] = it
	}
	// rate(5 minutes) over 730 h: 43,800 / 5 = 8,760 runs.
	const sched = ": outbox-sweeper, rate(5 minutes)"
	for name, want := range map[string]struct{ qty, usd float64 }{
		"CloudWatch alarms":                                                   {4, 0.4}, // two plain alarms + the two metrics of the math alarm
		"CloudWatch alarms, high resolution":                                  {1, 0.3}, // period 10 s
		"CloudWatch dashboards":                                               {1, 3},
		"Secrets Manager secrets the stack creates":                           {1, 0.4},
		"Secrets Manager secrets the stack reads (the operator creates them)": {2, 0.8}, // outbox/provider-secrets, dev/slack (the backup key is the stack's)
		"KMS customer managed keys":                                           {1, 1},
		"DynamoDB point-in-time recovery":                                     {2, 0.4},
		"DynamoDB storage":                                                    {2, 0.5},
		"Lambda requests" + sched:                                             {8760, 0.0018}, // 0.001752
		"Lambda compute" + sched:                                              {438, 0.0044},  // 8,760 x 0.2 s x 0.25 GB = 438 GB-s: 0.00438
		"X-Ray traces" + sched:                                                {8760, 0.0438},
		"DynamoDB reads" + sched:                                              {876000, 0.1095},
		"DynamoDB writes" + sched:                                             {8760, 0.0055}, // 0.005475 rounded to 4 places
		"CloudWatch custom metrics" + sched:                                   {2, 0.6},
		"CloudWatch Logs ingestion" + sched:                                   {0.009, 0.0044},  // 8,760 x 1,000 B = 0.00876 GB
		"SQS: idle polls of the queue mappings":                               {657000, 0.2628}, // 43,800 min x 15
		"DynamoDB Streams: polls of the stream mappings":                      {1, 0},
	} {
		it, ok := got[name]
		if !ok {
			t.Errorf("no item %q in %v", name, rep.Items)
			continue
		}
		if math.Abs(it.Quantity-want.qty) > 1e-9 || math.Abs(it.USDPerMonth-want.usd) > 1e-9 {
			t.Errorf("%s: %g for %g USD, want %g for %g USD", name, it.Quantity, it.USDPerMonth, want.qty, want.usd)
		}
		delete(got, name)
	}
	for name := range got {
		t.Errorf("unexpected item %q", name)
	}
	// 6.8 fixed + 1.032087 from the schedule and the queue mapping.
	if rep.USDPerMonth != 7.83 {
		t.Errorf("total %v, want 7.83", rep.USDPerMonth)
	}
	if tbl := rep.Table(); !strings.Contains(tbl, "| **total** | | | | **7.83** |") || !strings.Contains(tbl, "| CloudWatch dashboards | 1 | dashboard | 3 | 3.00 |") {
		t.Errorf("table:\n%s", tbl)
	}
}

func TestComputeRefusesWhatItCannotPrice(t *testing.T) {
	for name, tmpl := range map[string]string{
		"no schedule": `{"Resources": {"D": {"Type": "AWS::CloudWatch::Dashboard"}}}`,
		"cron":        strings.Replace(testTemplate, "rate(5 minutes)", "cron(0 12 * * ? *)", 1),
		"empty":       `{"Resources": {}}`,
		"not json":    `{`,
	} {
		if _, err := Compute([]byte(tmpl), testPrices()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The committed price table has every price and assumption Compute reads.
func TestThePriceTableIsComplete(t *testing.T) {
	b, err := os.ReadFile("../prices.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePrices(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.Idle.Sweep.BilledMS <= 0 || p.Idle.Sweep.RRU <= 0 || len(p.Idle.Sweep.MetricNames) == 0 {
		t.Errorf("idle.sweep is incomplete: %+v", p.Idle.Sweep)
	}
	if _, err := ParsePrices([]byte(`{"usd": {}, "lambda_memory_mb": 256, "idle": {"hours_per_month": 730}}`)); err == nil {
		t.Error("a table without prices was accepted")
	}
}

package ses_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/botharness/outbox/adapters/providers/fakes"
	"github.com/botharness/outbox/adapters/providers/ses"
	"github.com/botharness/outbox/core"
)

// Every documented error code the adapter maps, by code.
func TestClassifyByDocumentedCode(t *testing.T) {
	for code, want := range map[string]core.ErrorClass{
		"ThrottlingException":                core.ClassRateLimited,
		"TooManyRequestsException":           core.ClassRateLimited,
		"LimitExceededException":             core.ClassRejectedInput,
		"MessageRejected":                    core.ClassRejectedInput,
		"MailFromDomainNotVerifiedException": core.ClassRejectedInput,
		"BadRequestException":                core.ClassRejectedInput,
		"NotFoundException":                  core.ClassRejectedInput,
		"AccountSuspendedException":          core.ClassUnauthorized,
		"SendingPausedException":             core.ClassUnauthorized,
		"AccessDeniedException":              core.ClassUnauthorized,
		"UnrecognizedClientException":        core.ClassUnauthorized,
		"InvalidClientTokenId":               core.ClassUnauthorized,
		"ExpiredTokenException":              core.ClassUnauthorized,
		"SignatureDoesNotMatch":              core.ClassUnauthorized,
		"InternalFailure":                    core.ClassUnknownOutcome,
		"ServiceUnavailable":                 core.ClassUnknownOutcome,
		"SomethingNew":                       core.ClassUnknownOutcome,
	} {
		if got := ses.Classify(code); got != want {
			t.Errorf("Classify(%s) = %s, want %s", code, got, want)
		}
	}
}

func awsConfig(endpoint string) aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), BaseEndpoint: aws.String(endpoint)}
}

func request(id string) core.SendRequest {
	return core.SendRequest{IntentID: id, IdempotencyKey: id, Bot: "bot-1", Account: "mail", Action: ses.ActionEmail,
		Target: "jo@example.com", Payload: []byte(`{"subject":"Order 1001","text":"shipped"}`), Attempt: 1}
}

// The SDK retries on its own: with its default retryer one SendEmail after
// a 500 is three emails. The adapter's client sends once, whatever happens.
func TestSDKRetriesAreOff(t *testing.T) {
	fk := fakes.NewSES(t, time.Now)
	fk.AddIdentity("example.com")
	in := &sesv2.SendEmailInput{FromEmailAddress: aws.String("orders@example.com"), Destination: &types.Destination{ToAddresses: []string{"jo@example.com"}},
		Content: &types.EmailContent{Simple: &types.Message{Subject: &types.Content{Data: aws.String("s")}, Body: &types.Body{Text: &types.Content{Data: aws.String("b")}}}}}
	// The SDK's default: the measured fact the adapter exists to avoid.
	fk.Inject(fakes.Fault{Kind: fakes.ErrorAfterCommit}, fakes.Fault{Kind: fakes.ErrorAfterCommit}, fakes.Fault{Kind: fakes.ErrorAfterCommit})
	_, err := sesv2.NewFromConfig(awsConfig(fk.URL())).SendEmail(context.Background(), in)
	if err == nil || fk.Sent() != 3 {
		t.Fatalf("default SDK retryer: %d emails after a 500 (%v); the fact this test documents is 3", fk.Sent(), err)
	}
	t.Logf("default SDK retryer: %d emails from one SendEmail after a 500", fk.Sent())

	for _, fault := range []fakes.Kind{fakes.ErrorAfterCommit, fakes.DropAfterCommit} {
		fk := fakes.NewSES(t, time.Now)
		fk.AddIdentity("example.com")
		p, err := ses.New(nil, ses.Config{Client: ses.NewClient(awsConfig(fk.URL())), Timeout: 2 * time.Second,
			Accounts: map[string]ses.Account{"mail": {From: "orders@example.com"}}})
		if err != nil {
			t.Fatal(err)
		}
		fk.Inject(fakes.Fault{Kind: fault}, fakes.Fault{Kind: fault}, fakes.Fault{Kind: fault})
		_, err = p.Send(context.Background(), request("it_ses1"))
		var ue *core.UnknownOutcomeError
		if !errors.As(err, &ue) || fk.Requests() != 1 || fk.Sent() != 1 {
			t.Fatalf("%s: %d requests, %d emails, %v; want one request, one email, an unknown outcome", fault, fk.Requests(), fk.Sent(), err)
		}
	}
}

func TestSendCarriesTheIdentityAndClassifies(t *testing.T) {
	fk := fakes.NewSES(t, time.Now)
	fk.AddIdentity("example.com")
	fk.AddConfigurationSet("outbox-events")
	p, err := ses.New(nil, ses.Config{Client: ses.NewClient(awsConfig(fk.URL())), Timeout: 2 * time.Second,
		Accounts: map[string]ses.Account{"mail": {From: "orders@example.com", ConfigurationSet: "outbox-events"}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Send(context.Background(), request("it_ses2"))
	got := fk.SentWithTag(ses.TagIntent, "it_ses2")
	if err != nil || len(got) != 1 || res.ExternalID != got[0].MessageID || got[0].Tags[ses.TagAccount] != "mail" || got[0].ConfigurationSet != "outbox-events" {
		t.Fatalf("%+v %v %+v", res, err, got)
	}
	for fault, want := range map[fakes.Fault]core.ErrorClass{
		{Kind: fakes.Reject}:       core.ClassRejectedInput,
		{Kind: fakes.Unauthorized}: core.ClassUnauthorized,
		{Kind: fakes.RateLimit}:    core.ClassRateLimited,
		{Kind: fakes.ProviderError, Code: "LimitExceededException", Description: "too many"}:         core.ClassRejectedInput,
		{Kind: fakes.ProviderError, Code: "TooManyRequestsException", Status: 429, Description: "x"}: core.ClassRateLimited,
		{Kind: fakes.ProviderError, Code: "SendingPausedException", Description: "paused"}:           core.ClassUnauthorized,
	} {
		fk.Inject(fault)
		_, err := p.Send(context.Background(), request("it_ses3"))
		if c := core.ClassOf(err); c != want {
			t.Errorf("%+v: %s (%v), want %s", fault, c, err, want)
		}
	}
	if n := len(fk.SentWithTag(ses.TagIntent, "it_ses3")); n != 0 {
		t.Fatalf("%d emails from refusals", n)
	}
}

// A configured profile's credentials win over the environment's keys (make
// run's environment holds the emulators' placeholder keys); the endpoint is
// the SDK's standard AWS_ENDPOINT_URL_SESV2.
func TestProfileAndEndpointFromTheSDKsConfiguration(t *testing.T) {
	fk := fakes.NewSES(t, time.Now)
	fk.AddIdentity("example.com")
	dir := t.TempDir()
	creds := dir + "/credentials"
	if err := os.WriteFile(creds, []byte("[outbox-ses]\naws_access_key_id = AKIAPROFILE\naws_secret_access_key = profile-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_ENDPOINT_URL_SESV2", fk.URL())
	for profile, want := range map[string]string{"": "local", "outbox-ses": "AKIAPROFILE"} {
		p, err := ses.New(nil, ses.Config{Region: "us-east-1", Profile: profile, Accounts: map[string]ses.Account{"mail": {From: "orders@example.com"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Send(context.Background(), request("it_prof")); err != nil {
			t.Fatalf("profile %q: %v", profile, err)
		}
		keys := fk.AccessKeys()
		if got := keys[len(keys)-1]; got != want {
			t.Errorf("profile %q: signed with %q, want %q", profile, got, want)
		}
	}
}

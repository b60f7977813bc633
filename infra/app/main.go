// Command app is the outbox CDK app. Run it from infra/:
//
//	go run ./app [-o cdk.out] [-c key=value ...]   # synth without the CDK CLI
//	cdk synth|deploy [-c key=value ...]            # cdk.json runs `go run ./app`
//
// Context keys (cdk -c, or -c here): stackName (Outbox), dev (false),
// namePrefix (outbox), assetDir (../dist), functionsDir (../functions),
// functions (comma separated; default: every DefaultFunctions entry whose
// functions/<name>/main.go exists), stubAssets (false), arch (arm64 |
// x86_64), httpApi (true), logLevel, logRetentionDays, providerConfig (JSON),
// attemptPolicy (JSON, OUTBOX_ATTEMPT_POLICY),
// providerSecretNames (comma separated), alarmTopicArn, account, region,
// nag (true).
//
// Synthesis makes no AWS calls: no lookups, and an environment only when
// both account and region are given.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/botharness/outbox/infra"
)

func main() {
	err := run(os.Args[1:])
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra/app:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	ctx := map[string]interface{}{}
	outdir := "cdk.out"
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-c", "--context":
			if i+1 >= len(args) || !strings.Contains(args[i+1], "=") {
				return fmt.Errorf("%s wants key=value", a)
			}
			k, v, _ := strings.Cut(args[i+1], "=")
			ctx[k] = v
			i++
		case "-o", "--output":
			if i+1 >= len(args) {
				return fmt.Errorf("%s wants a directory", a)
			}
			outdir = args[i+1]
			i++
		default:
			return fmt.Errorf("unknown argument %q (want -c key=value, -o dir)", a)
		}
	}
	appProps := &awscdk.AppProps{Context: &ctx}
	if os.Getenv("CDK_OUTDIR") == "" { // not run by the CDK CLI
		appProps.Outdir = jsii.String(outdir)
	}
	app := awscdk.NewApp(appProps)

	get := func(k, def string) string {
		if v := app.Node().TryGetContext(jsii.String(k)); v != nil {
			switch v := v.(type) {
			case string:
				return v
			default:
				return fmt.Sprint(v)
			}
		}
		return def
	}
	boolean := func(k string, def bool) (bool, error) {
		v := get(k, strconv.FormatBool(def))
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("context %s=%q: want true or false", k, v)
		}
		return b, nil
	}

	var dev, stub, nag, httpAPI bool
	for _, b := range []struct {
		key string
		def bool
		v   *bool
	}{{"dev", false, &dev}, {"stubAssets", false, &stub}, {"nag", true, &nag}, {"httpApi", true, &httpAPI}} {
		v, err := boolean(b.key, b.def)
		if err != nil {
			return err
		}
		*b.v = v
	}

	props := &infra.OutboxStackProps{
		Dev:            dev,
		NamePrefix:     get("namePrefix", ""),
		LogLevel:       get("logLevel", ""),
		ProviderConfig: get("providerConfig", ""),
		AttemptPolicy:  get("attemptPolicy", ""),
		AlarmTopicArn:  get("alarmTopicArn", ""),
		Architecture:   get("arch", ""),
		NoHTTPAPI:      !httpAPI,
	}
	// A literal secret must end the synth here, with one line naming the
	// field (never the value), before anything is built.
	if err := infra.ValidateProviderConfig(props.ProviderConfig); err != nil {
		return fmt.Errorf("context providerConfig: %w", err)
	}
	if s := get("providerSecretNames", ""); s != "" {
		props.ProviderSecretNames = strings.Split(s, ",")
	}
	if s := get("routeThrottles", ""); s != "" {
		// {"webhooks":{"rateLimit":20,"burstLimit":40}, ...}
		if err := json.Unmarshal([]byte(s), &props.RouteThrottles); err != nil {
			return fmt.Errorf("context routeThrottles: %w", err)
		}
	}
	if s := get("logRetentionDays", ""); s != "" {
		rd, ok := retention[s]
		if !ok {
			return fmt.Errorf("context logRetentionDays=%q: want one of 1,3,5,7,14,30,60,90,180,365", s)
		}
		props.LogRetention = rd
	}
	account, region := get("account", ""), get("region", "")
	if account != "" && region != "" {
		props.Env = &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
	} else if account != "" || region != "" {
		return fmt.Errorf("context account and region go together (got account=%q region=%q)", account, region)
	}

	functions, err := selectFunctions(get("functions", ""), get("functionsDir", filepath.Join("..", "functions")))
	if err != nil {
		return err
	}
	assetDir := get("assetDir", filepath.Join("..", "dist"))
	if stub {
		// Placeholder bootstraps: a template to inspect or diff, never to
		// deploy (the functions would fail on every invocation).
		dir, err := os.MkdirTemp("", "outbox-stub-assets-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		for _, f := range functions {
			if err := os.MkdirAll(filepath.Join(dir, f.Name), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f.Name, "bootstrap"), []byte("#!/bin/sh\necho stub asset >&2; exit 1\n"), 0o755); err != nil {
				return err
			}
		}
		assetDir = dir
		fmt.Fprintln(os.Stderr, "infra/app: stubAssets=true: the template's Lambda code is a placeholder; do not deploy it")
	} else {
		var missing []string
		for _, f := range functions {
			if _, err := os.Stat(filepath.Join(assetDir, f.Name, "bootstrap")); err != nil {
				missing = append(missing, filepath.Join(assetDir, f.Name, "bootstrap"))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing function builds (run `make build`, or synth with -c stubAssets=true to inspect the template only):\n  %s", strings.Join(missing, "\n  "))
		}
	}
	props.AssetDir = assetDir
	props.Functions = functions
	if err := props.Validate(); err != nil { // NewOutboxStack would panic
		return err
	}

	infra.NewOutboxStack(app, get("stackName", "Outbox"), props)
	if nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	app.Synth(nil)
	return nil
}

// selectFunctions picks the DefaultFunctions entries to deploy: those named
// in list, or else those whose entry point exists (a function another issue
// has not written yet is left out, with a note, rather than failing synth).
func selectFunctions(list, functionsDir string) ([]infra.FunctionSpec, error) {
	all := infra.DefaultFunctions()
	var out []infra.FunctionSpec
	if list != "" {
		want := map[string]bool{}
		for _, n := range strings.Split(list, ",") {
			want[strings.TrimSpace(n)] = true
		}
		for _, f := range all {
			if want[f.Name] {
				out = append(out, f)
				delete(want, f.Name)
			}
		}
		for n := range want {
			return nil, fmt.Errorf("context functions: %q is not in infra.DefaultFunctions", n)
		}
		return out, nil
	}
	for _, f := range all {
		if _, err := os.Stat(filepath.Join(functionsDir, f.Name, "main.go")); err != nil {
			fmt.Fprintf(os.Stderr, "infra/app: note: %s has no %s/%s/main.go yet; leaving it (and its routes) out\n", f.Name, functionsDir, f.Name)
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

var retention = map[string]awslogs.RetentionDays{
	"1": awslogs.RetentionDays_ONE_DAY, "3": awslogs.RetentionDays_THREE_DAYS,
	"5": awslogs.RetentionDays_FIVE_DAYS, "7": awslogs.RetentionDays_ONE_WEEK,
	"14": awslogs.RetentionDays_TWO_WEEKS, "30": awslogs.RetentionDays_ONE_MONTH,
	"60": awslogs.RetentionDays_TWO_MONTHS, "90": awslogs.RetentionDays_THREE_MONTHS,
	"180": awslogs.RetentionDays_SIX_MONTHS, "365": awslogs.RetentionDays_ONE_YEAR,
}

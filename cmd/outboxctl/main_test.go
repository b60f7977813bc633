package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 50: without AWS credentials, the table commands say what to set
// (make run's banner exports, or the deployed stack's table) instead of
// the SDK's last resort, "no EC2 IMDS role found".
func TestTableCommandsWithoutCredentialsSayWhatToSet(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1",
	} {
		t.Setenv(k, v)
	}
	_, err := tableClients(context.Background())
	if err == nil {
		t.Fatal("no error without credentials")
	}
	for _, want := range []string{"no AWS credentials", "make run", "banner's export lines", "OUTBOX_TABLE", "TableName"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	// With credentials (the banner's placeholders), the clients load.
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	if _, err := tableClients(context.Background()); err != nil {
		t.Errorf("with credentials: %v", err)
	}
}

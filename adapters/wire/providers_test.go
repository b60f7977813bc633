package wire

import (
	"strings"
	"testing"
)

// TestWithSandboxAddsNotReplaces: make run's provider configuration keeps
// the sandbox beside what OUTBOX_PROVIDER_CONFIG names; a "sandbox" block of
// its own wins, and "sandbox": null turns it off.
func TestWithSandboxAddsNotReplaces(t *testing.T) {
	for _, c := range []struct {
		in, want string
	}{
		{``, `sandbox@http://sb`},
		{`{"telegram":{"accounts":{"b1":{"token":"t"}}}}`, `sandbox@http://sb telegram:b1`},
		{`{"sandbox":{"baseUrl":"http://mine"}}`, `sandbox@http://mine`},
		{`{"sandbox":null,"telegram":{"accounts":{"b1":{"token":"t"}}}}`, `telegram:b1`},
	} {
		merged, err := WithSandbox(c.in, "http://sb", 3000)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := DescribeProviders(merged)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			s := p.Name
			if p.Accounts == nil {
				s += "@" + p.BaseURL
			} else {
				s += ":" + strings.Join(p.Accounts, ",")
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: loaded %v, want %s", c.in, got, c.want)
		}
	}
	if _, err := WithSandbox(`{"slack":`, "http://sb", 3000); err == nil || !strings.Contains(err.Error(), "OUTBOX_PROVIDER_CONFIG") {
		t.Fatalf("a malformed configuration: %v, want an error naming OUTBOX_PROVIDER_CONFIG", err)
	}
}

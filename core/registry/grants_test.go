package registry

import (
	"testing"
	"time"

	"github.com/botharness/outbox/core"
)

// TestGrantUnchanged: a PUT keeps the version only when it asks for exactly
// the stored grant.
func TestGrantUnchanged(t *testing.T) {
	exp := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cur := &core.Grant{Bot: "b", Provider: "p", Account: "a", Actions: []string{"x", "y"}, Targets: []string{"*"}, ExpiresAt: &exp}
	spec := GrantSpec{Bot: "b", Provider: "p", Account: "a", Actions: []string{"x", "y"}, Targets: []string{"*"}, ExpiresAt: &exp}
	later := exp.Add(1)
	for _, c := range []struct {
		name   string
		change func(*GrantSpec)
		want   bool
	}{
		{"same", func(*GrantSpec) {}, true},
		{"expected version given", func(s *GrantSpec) { v := int64(1); s.ExpectedVersion = &v }, true},
		{"bot", func(s *GrantSpec) { s.Bot = "c" }, false},
		{"provider", func(s *GrantSpec) { s.Provider = "q" }, false},
		{"account", func(s *GrantSpec) { s.Account = "b" }, false},
		{"actions", func(s *GrantSpec) { s.Actions = []string{"x"} }, false},
		{"actions order", func(s *GrantSpec) { s.Actions = []string{"y", "x"} }, false},
		{"targets", func(s *GrantSpec) { s.Targets = []string{"c*"} }, false},
		{"expiry", func(s *GrantSpec) { s.ExpiresAt = &later }, false},
		{"no expiry", func(s *GrantSpec) { s.ExpiresAt = nil }, false},
	} {
		s := spec
		c.change(&s)
		if got := GrantUnchanged(cur, s); got != c.want {
			t.Errorf("%s: GrantUnchanged = %v, want %v", c.name, got, c.want)
		}
	}
	if GrantUnchanged(nil, spec) {
		t.Error("no stored grant: a PUT creates one")
	}
}

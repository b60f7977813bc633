package client

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

// clients/keyvectors.json is the one list of idempotency-key vectors the Go,
// TypeScript and Python clients all check, so a key derived by a bot in one
// language is the key a bot in another derives from the same parts.
func TestKeyVectors(t *testing.T) {
	b, err := os.ReadFile("../clients/keyvectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		NewKeyPattern string `json:"newKeyPattern"`
		KeyFor        []struct {
			Parts []string `json:"parts"`
			Key   string   `json:"key"`
		} `json:"keyFor"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.KeyFor) < 10 {
		t.Fatalf("only %d vectors", len(doc.KeyFor))
	}
	for _, v := range doc.KeyFor {
		if got := KeyFor(v.Parts...); got != v.Key {
			t.Errorf("KeyFor(%q) = %q, want %q", v.Parts, got, v.Key)
		}
	}
	re := regexp.MustCompile(doc.NewKeyPattern)
	seen := map[string]bool{}
	for range 100 {
		k := NewKey()
		if !re.MatchString(k) || seen[k] {
			t.Fatalf("NewKey() = %q: not %s, or repeated", k, doc.NewKeyPattern)
		}
		seen[k] = true
	}
}

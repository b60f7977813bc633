package dynamo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/botharness/outbox/core"
)

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Issue 24 finding 9: a crafted cursor of the right listing but with a
// missing, empty, oversized or misshapen key reached DynamoDB, which
// refused the ExclusiveStartKey with a ValidationException: 500. Every
// listing now refuses it as invalid_cursor before any query.
func TestCraftedCursorsAreInvalidCursorAndNeverReachDynamoDB(t *testing.T) {
	raw, table := testTable(t, "cursor")
	db := &countingDB{Client: raw}
	ctx := context.Background()
	store, reg, tokens, wh := New(db, table), NewRegistry(db, table), NewTokens(db, table), NewWebhooks(db, table)
	long := strings.Repeat("x", 1100)
	single := func(gsi1pk, pkPfx, sk string) map[string]string {
		return map[string]string{
			"crafted: no table keys":    b64(map[string]string{"gsi1pk": gsi1pk, "gsi1sk": "a"}),
			"crafted: empty sort key":   b64(map[string]string{"gsi1pk": gsi1pk, "gsi1sk": "", "pk": pkPfx + "x", "sk": sk}),
			"crafted: oversized key":    b64(map[string]string{"gsi1pk": gsi1pk, "gsi1sk": long, "pk": pkPfx + "x", "sk": sk}),
			"crafted: another item":     b64(map[string]string{"gsi1pk": gsi1pk, "gsi1sk": "a", "pk": "SOURCE#x", "sk": "SOURCE"}),
			"crafted: extra attribute":  b64(map[string]string{"gsi1pk": gsi1pk, "gsi1sk": "a", "pk": pkPfx + "x", "sk": sk, "gsi2pk": "P"}),
			"crafted: another listing":  b64(map[string]string{"gsi1pk": "HUMAN#0", "gsi1sk": "a", "pk": pkPfx + "x", "sk": sk}),
			"not base64":                "%%%",
			"not json":                  base64.RawURLEncoding.EncodeToString([]byte("nope")),
			"crafted: wrong sort value": b64(map[string]string{"gsi1pk": gsi1pk, "gsi1sk": "a", "pk": pkPfx + "x", "sk": "INTENT"}),
		}
	}
	merged := func(listing, pkPfx, sk string) map[string]string {
		pos := func(p map[string]any) string { return b64(map[string]any{"l": listing, "p": p}) }
		return map[string]string{
			"crafted: empty position":     pos(map[string]any{"0": map[string]string{"s": "", "p": "", "k": ""}}),
			"crafted: shard out of range": pos(map[string]any{"999": map[string]string{"s": "a", "p": pkPfx + "x", "k": sk}}),
			"crafted: shard not a number": pos(map[string]any{"-1": map[string]string{"s": "a", "p": pkPfx + "x", "k": sk}}),
			"crafted: oversized key":      pos(map[string]any{"0": map[string]string{"s": long, "p": pkPfx + "x", "k": sk}}),
			"crafted: another item":       pos(map[string]any{"0": map[string]string{"s": "a", "p": "GRANT#g", "k": "GRANT"}}),
			"crafted: done out of range":  b64(map[string]any{"l": listing, "d": []int{70000}}),
			"crafted: unknown field":      b64(map[string]any{"l": listing, "x": 1}),
			"crafted: another listing":    b64(map[string]any{"l": "other"}),
		}
	}
	lists := map[string]struct {
		cursors map[string]string
		list    func(cursor string) error
	}{
		"grants": {single(grantsGSI, grantPfx, grantSK), func(c string) error { _, _, err := reg.ListGrants(ctx, "", c, 10); return err }},
		"tokens": {single(tokensGSI, tokenPfx, "TOKEN"), func(c string) error { _, _, err := tokens.ListTokens(ctx, c, 10); return err }},
		"needs-human": {merged("needs-human", "INTENT#", intentSK), func(c string) error {
			_, _, err := store.ListPage(ctx, core.StatusNeedsHuman, c, 10)
			return err
		}},
		"unresolved webhooks": {merged("unresolved-webhooks", "WHEVT#", eventSK), func(c string) error { _, _, err := wh.ListUnresolved(ctx, c, 10); return err }},
	}
	for name, l := range lists {
		// The first page's cursor shape is accepted (the listing works).
		if err := l.list(""); err != nil {
			t.Fatalf("%s: first page: %v", name, err)
		}
		for what, c := range l.cursors {
			before := db.queries.Load()
			err := l.list(c)
			var ve *core.ValidationError
			if !errors.As(err, &ve) || ve.Code != core.CodeInvalidCursor || ve.Field != "cursor" {
				t.Errorf("%s, %s: err %v, want invalid_cursor", name, what, err)
			}
			if n := db.queries.Load() - before; n != 0 {
				t.Errorf("%s, %s: %d queries reached DynamoDB", name, what, n)
			}
		}
	}
}

package backup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
)

func TestVerifyManifest(t *testing.T) {
	key := []byte("0123456789abcdef-key")
	base := Manifest{Format: ManifestFormat, BackupID: "bk_1", Profile: "bot-1", ItemCount: 1, ItemsSHA256: "ab", StatusCounts: map[string]int{}}
	sealed := base
	sealed.Seal(key)
	cases := []struct {
		name string
		edit func(m *Manifest)
		ok   bool
	}{
		{"as sealed", func(m *Manifest) {}, true},
		{"items hash edited, checksum recomputed", func(m *Manifest) { m.ItemsSHA256 = "cd"; m.ManifestSHA256 = m.checksum() }, false},
		{"profile edited", func(m *Manifest) { m.Profile = "bot-2" }, false},
		{"signature removed", func(m *Manifest) { m.Signature = "" }, false},
		{"format 1", func(m *Manifest) { m.Format = 1 }, false},
		{"signed with another key", func(m *Manifest) { m.Seal([]byte("another-key-0123456")) }, false},
		{"another backup's id", func(m *Manifest) { m.BackupID = "bk_2"; m.Seal(key) }, false},
	}
	for _, c := range cases {
		m := sealed
		m.StatusCounts = map[string]int{}
		c.edit(&m)
		err := VerifyManifest(&m, "bk_1", key)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidSnapshot) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A key shorter than MinKeyBytes (or none) refuses backups and restores.
func TestNoBackupWithoutAKey(t *testing.T) {
	for _, k := range [][]byte{nil, []byte("short")} {
		s := &Service{Key: k, Clock: core.SystemClock}
		if _, err := s.Backup(context.Background(), "bot-1"); !errors.Is(err, ErrNoBackupKey) {
			t.Errorf("backup with key %q: %v", k, err)
		}
		if _, err := s.Manifest(context.Background(), "bk_1"); !errors.Is(err, ErrNoBackupKey) {
			t.Errorf("manifest with key %q: %v", k, err)
		}
	}
}

func TestCheckOwned(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	intent := func(bot, key string) map[string]types.AttributeValue {
		in := &core.Intent{ID: core.IntentID(bot, key), Bot: bot, IdempotencyKey: key, Provider: "sandbox", Account: "a", Action: "send_message",
			Target: "t", Status: core.StatusSucceeded, CreatedAt: now, UpdatedAt: now, Attempts: []core.Attempt{}}
		item, err := dynamo.MarshalIntent(in)
		if err != nil {
			t.Fatal(err)
		}
		return item
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	mine := intent("bot-1", "k1")
	id := core.IntentID("bot-1", "k1")
	page := map[string]types.AttributeValue{"pk": s("INTENT#" + id), "sk": s("HIST#000001"), "intentId": s(id),
		"gsi2pk": s(dynamo.ProfilePK("bot-1", id, dynamo.ProfileShards))}
	source := map[string]types.AttributeValue{"pk": s(dynamo.SourcePK("bot-1", "src-1")), "sk": s("SOURCE"), "bot": s("bot-1"), "sourceId": s("src-1"),
		"gsi2pk": s(dynamo.ProfilePK("bot-1", "src-1", dynamo.ProfileShards))}
	relabelled := intent("bot-2", "k2")
	relabelled["bot"] = s("bot-1")
	with := func(item map[string]types.AttributeValue, k string, v types.AttributeValue) map[string]types.AttributeValue {
		out := map[string]types.AttributeValue{}
		for a, b := range item {
			out[a] = b
		}
		out[k] = v
		return out
	}
	cases := []struct {
		name  string
		items []map[string]types.AttributeValue
		ok    bool
	}{
		{"intent, page, source", []map[string]types.AttributeValue{page, mine, source}, true},
		{"token", []map[string]types.AttributeValue{mine, {"pk": s("TOKEN#ab"), "sk": s("TOKEN"), "kind": s("operator")}}, false},
		{"grant", []map[string]types.AttributeValue{{"pk": s("GRANT#g"), "sk": s("GRANT")}}, false},
		{"capability", []map[string]types.AttributeValue{{"pk": s("CAPABILITY#sandbox#a"), "sk": s("CAPABILITY")}}, false},
		{"another bot's intent", []map[string]types.AttributeValue{intent("bot-2", "k2")}, false},
		{"another bot's intent relabelled", []map[string]types.AttributeValue{relabelled}, false},
		{"a page without its intent", []map[string]types.AttributeValue{page}, false},
		{"a page with a listing entry", []map[string]types.AttributeValue{mine, with(page, "gsi1pk", s("TOKENS"))}, false},
		{"another bot's source", []map[string]types.AttributeValue{with(source, "bot", s("bot-2"))}, false},
		{"an intent key on a token item", []map[string]types.AttributeValue{with(mine, "pk", s("TOKEN#ab"))}, false},
	}
	for _, c := range cases {
		err := CheckOwned("bot-1", c.items)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidSnapshot) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

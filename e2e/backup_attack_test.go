package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/auth"
)

const backupBucket = "outbox-backups"

// snapshot is a backup's objects as an attacker with write access to the
// bucket sees them.
type snapshot struct {
	m     backup.Manifest
	items []map[string]types.AttributeValue
}

func (e *env) s3get(key string) []byte {
	e.t.Helper()
	obj, err := e.clients.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(backupBucket), Key: aws.String(key)})
	if err != nil {
		e.t.Fatal(err)
	}
	defer obj.Body.Close()
	b, _ := io.ReadAll(obj.Body)
	return b
}

func (e *env) s3put(key string, b []byte) {
	e.t.Helper()
	if _, err := e.clients.S3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(backupBucket), Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) readSnapshot(id string) snapshot {
	e.t.Helper()
	var s snapshot
	if err := json.Unmarshal(e.s3get("backups/"+id+"/manifest.json"), &s.m); err != nil {
		e.t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(e.s3get(s.m.ItemsObject)))
	if err != nil {
		e.t.Fatal(err)
	}
	dec := json.NewDecoder(zr)
	for {
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			e.t.Fatal(err)
		}
		item, err := backup.DecodeItem(raw)
		if err != nil {
			e.t.Fatal(err)
		}
		s.items = append(s.items, item)
	}
	return s
}

// writeSnapshot writes s back with every hash recomputed (what an attacker
// can always do), then, if key is given, the signature too (what only a
// holder of the deployment's backup key can do).
func (e *env) writeSnapshot(s snapshot, key []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	for _, it := range s.items {
		line, err := backup.EncodeItem(it)
		if err != nil {
			e.t.Fatal(err)
		}
		_ = enc.Encode(line)
	}
	_ = zw.Close()
	sum := sha256.Sum256(buf.Bytes())
	s.m.ItemsSHA256, s.m.ItemsBytes, s.m.ItemCount = hex.EncodeToString(sum[:]), int64(buf.Len()), len(s.items)
	sig := s.m.Signature
	s.m.Seal([]byte("an attacker's guess at the key"))
	s.m.Signature = sig // the checksum is unkeyed; the old signature stays
	if key != nil {
		s.m.Seal(key)
	}
	e.s3put(s.m.ItemsObject, buf.Bytes())
	mb, _ := json.Marshal(s.m)
	e.s3put("backups/"+s.m.BackupID+"/manifest.json", mb)
}

// Issue 24 finding 3: restore wrote whatever a snapshot held, and the
// snapshot was protected by unkeyed SHA-256 only, so a snapshot edited to hold
// an operator TOKEN# item, hashes recomputed, made a forged token an
// operator. Restore now verifies an HMAC under the deployment's backup key
// and writes only what the profile owns; a refused restore writes nothing.
func TestRestoreRefusesForgedAndForeignSnapshots(t *testing.T) {
	t.Parallel()
	key := []byte("e2e-backup-key-0123456789abcdef")
	src := newEnv(t, options{Config: wire.Config{BackupKey: string(key)}})
	id := src.mustSubmit("bka-1", intentBody("acct-bka", "chan-1", "one"))
	src.waitStatus(id, 10*time.Second, core.StatusSucceeded)
	m, _ := src.backup(testBot)
	clean := src.readSnapshot(m.BackupID)
	if m.Signature == "" || len(clean.items) != 1 {
		t.Fatalf("manifest %+v, %d items", m, len(clean.items))
	}
	const forged = "forged-operator-token"
	tokenItem := map[string]types.AttributeValue{
		"pk": strAV("TOKEN#" + auth.TokenHash(forged)), "sk": strAV("TOKEN"), "id": strAV("tok_forged"),
		"kind": strAV(core.PrincipalOperator), "name": strAV("mallory"), "createdAt": strAV(time.Now().UTC().Format(time.RFC3339Nano)),
	}
	// An intent of another bot: the snapshot's intent, moved to bot-2.
	foreign := map[string]types.AttributeValue{}
	for k, v := range clean.items[0] {
		foreign[k] = v
	}
	key2 := "bka-foreign"
	fid := core.IntentID(testBot2, key2)
	foreign["bot"], foreign["idempotencyKey"], foreign["id"], foreign["pk"] = strAV(testBot2), strAV(key2), strAV(fid), strAV("INTENT#"+fid)
	grantItem := map[string]types.AttributeValue{"pk": strAV("GRANT#g-evil"), "sk": strAV("GRANT"), "bot": strAV(testBot)}

	cases := []struct {
		name  string
		edit  func(s *snapshot)
		key   []byte
		error string
	}{
		{"operator token, hashes recomputed", func(s *snapshot) { s.items = append(s.items, tokenItem) }, nil, "signature"},
		{"operator token, signed with the key", func(s *snapshot) { s.items = append(s.items, tokenItem) }, key, "does not belong to profile"},
		{"another bot's intent, signed", func(s *snapshot) { s.items = append(s.items, foreign) }, key, "another bot"},
		{"a grant, signed", func(s *snapshot) { s.items = append(s.items, grantItem) }, key, "does not belong to profile"},
		{"manifest re-hashed without the key", func(s *snapshot) { s.m.StatusCounts = map[string]int{"pending": 1} }, nil, "signature"},
		{"unsigned", func(s *snapshot) { s.m.Signature = "" }, nil, "not signed"},
		{"unsigned format 1", func(s *snapshot) { s.m.Format, s.m.Signature = 1, "" }, nil, "unsigned"},
		{"signed with another key", func(s *snapshot) {}, []byte("another-deployments-key-0123456"), "signature"},
	}
	// Each restore target is a fresh deployment that only restores (and
	// refuses): no stream or queue mapping to run, and it stops after its
	// case, so the cases' stacks do not poll side by side to the end.
	target := func(backupKey string) *env {
		return startEnv(t, options{Config: wire.Config{BackupKey: backupKey}, DisableStream: true, DisableQueue: true}, src.sb, src.sbURL)
	}
	for _, c := range cases {
		s := src.readSnapshot(m.BackupID)
		s.m = clean.m
		s.items = append([]map[string]types.AttributeValue{}, clean.items...)
		c.edit(&s)
		src.writeSnapshot(s, c.key)
		dst := target(string(key))
		before := dst.dump()
		r, _ := dst.restore(m.BackupID)
		if r.status != http.StatusUnprocessableEntity || r.errorCode() != "snapshot_invalid" || !strings.Contains(string(r.body), c.error) {
			t.Fatalf("%s: %d %s, want 422 snapshot_invalid (%s)", c.name, r.status, r.body, c.error)
		}
		if after := dst.dump(); !equal(before, after) {
			t.Fatalf("%s: a refused restore wrote %d items", c.name, len(after)-len(before))
		}
		if dst.do("GET", "/v1/admin/tokens", forged, nil, "").status != http.StatusForbidden {
			t.Fatalf("%s: the forged token is accepted", c.name)
		}
		dst.stop()
	}
	// The snapshot as Backup wrote it still restores.
	src.writeSnapshot(clean, key)
	dst := target(string(key))
	if r, rep := dst.restore(m.BackupID); r.status != http.StatusOK || rep.Written != 1 {
		t.Fatalf("the untouched snapshot: %d %s", r.status, r.body)
	}
	dst.stop()
	// A deployment with another key refuses even the untouched snapshot.
	other := target("yet-another-key-0123456789abcdef")
	if r, _ := other.restore(m.BackupID); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("restore under another key: %d %s", r.status, r.body)
	}
}

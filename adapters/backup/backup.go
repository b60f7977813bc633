// Package backup takes a profile (one bot's outbox) to S3 behind a barrier
// and restores it without ever resuming uncertain work.
//
// A snapshot is two objects under backups/<backupId>/: items.jsonl.gz (one
// DynamoDB-JSON item per line, gzip) and manifest.json (barrier time, counts,
// SHA-256 of the items object, the intents in flight at the cutoff, the
// manifest's own checksum, and its HMAC-SHA256 signature under the
// deployment's backup key). Restore verifies all of it, and that every item
// belongs to the manifest's profile (owned.go), before writing anything.
package backup

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/oklog/ulid/v2"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/payloads"
	"github.com/botharness/outbox/client"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/restore"
)

// ObjectStore is the part of the S3 client backups use.
type ObjectStore interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Manifest describes one snapshot. It is the admin API's body too, so the
// one struct is client.Manifest; the methods below are the server's.
type Manifest client.Manifest

// ManifestFormat is the manifest format this code writes and restores: 2
// is signed; format 1 (unsigned) is refused.
const ManifestFormat = 2

// MinKeyBytes is the shortest backup key accepted (docs/decisions.md).
const MinKeyBytes = 16

func (m Manifest) checksum() string {
	m.ManifestSHA256, m.Signature = "", ""
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Sign returns the manifest's signature under key.
func (m Manifest) Sign(key []byte) string {
	m.Signature = ""
	b, _ := json.Marshal(m)
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil))
}

// Seal sets the manifest's checksum and signature (backups, and tests that
// play an insider holding the key).
func (m *Manifest) Seal(key []byte) {
	m.ManifestSHA256 = m.checksum()
	m.Signature = m.Sign(key)
}

// ErrNoBackupKey: backups and restores need the deployment's backup key
// (OUTBOX_BACKUP_KEY locally, the secret named by OUTBOX_BACKUP_KEY_SECRET in AWS).
var ErrNoBackupKey = errors.New("no backup key is configured (OUTBOX_BACKUP_KEY, or OUTBOX_BACKUP_KEY_SECRET naming a Secrets Manager secret): backups are not signed or verified without it")

func (s *Service) key() ([]byte, error) {
	if len(s.Key) < MinKeyBytes {
		return nil, ErrNoBackupKey
	}
	return s.Key, nil
}

// PayloadObjects is the claim-check store as backups see it: raw objects by
// reference, no cache.
type PayloadObjects interface {
	GetObject(ctx context.Context, ref string) ([]byte, error)
	PutObject(ctx context.Context, ref string, b []byte) error
}

// payloadLine is one payload object in a snapshot.
type payloadLine struct {
	Ref  string `json:"ref"`
	Hash string `json:"hash"`
	Data []byte `json:"data"`
}

// ErrInvalidSnapshot: the snapshot is missing, truncated or tampered with.
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// Service runs backups and restores for one table.
type Service struct {
	Store      *dynamo.Store
	S3         ObjectStore
	Bucket     string
	Dispatcher *core.Dispatcher
	// Payloads, when set, lets backups carry claim-checked payloads and
	// restores put them back.
	Payloads PayloadObjects
	Clock    core.Clock
	// Key signs manifests and verifies them (HMAC-SHA256, at least
	// MinKeyBytes); without it Backup and Restore refuse (ErrNoBackupKey).
	Key        []byte
	BarrierTTL time.Duration
	Log        *slog.Logger
	// Progress, when set, is told how many items have been captured so far.
	Progress func(backupID string, items int)
}

func (s *Service) log() *slog.Logger { return cmp.Or(s.Log, slog.Default()) }

// Prefix is where every snapshot object lives in the backup bucket (the
// stack grants object access under it only).
const Prefix = "backups/"

func prefix(id string) string { return Prefix + id + "/" }

// Backup snapshots a profile. It raises the barrier (no new claims), copies
// every item, uploads, and lifts the barrier. It never waits for provider
// calls in flight: those are listed as in-flight-at-cutoff.
func (s *Service) Backup(ctx context.Context, profile string) (*Manifest, error) {
	if strings.TrimSpace(profile) == "" {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "profile", Message: "profile (the bot name) is required"}
	}
	key, err := s.key()
	if err != nil {
		return nil, err
	}
	now := s.Clock.Now()
	id := "bk_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy()).String())
	ttl := s.BarrierTTL
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	// Lift on every way out, including a failed raise: the raise may have
	// been applied with its response lost. The lift is conditional on this
	// backup's id, so it never touches another backup's barrier.
	defer func() {
		if err := s.Store.LiftBarrier(context.WithoutCancel(ctx), profile, id); err != nil {
			s.log().ErrorContext(ctx, "lift barrier failed; it expires by itself", "backup", id, "profile", profile, "err", err.Error())
		}
	}()
	if err := s.Store.RaiseBarrier(ctx, profile, id, now, ttl); err != nil {
		return nil, err
	}
	// Let every inline put whose barrier read preceded the raise land before
	// the first read (core.InlineBarrierFresh): core.BarrierSettle of real
	// time, not s.Clock (it bounds request latency).
	t := time.NewTimer(core.BarrierSettle)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	}
	m := &Manifest{Format: ManifestFormat, BackupID: id, Profile: profile, Table: s.Store.Table(), BarrierAt: now,
		ItemsObject: prefix(id) + "items.jsonl.gz", StatusCounts: map[string]int{}, InFlightAtCutoff: []string{}}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	refs := map[string]string{} // payload ref -> hash
	var inflight []map[string]types.AttributeValue
	add := func(item map[string]types.AttributeValue) error {
		if st, ok := item["status"].(*types.AttributeValueMemberS); ok {
			m.StatusCounts[st.Value]++
			if core.Status(st.Value) == core.StatusInFlight {
				if idv, ok := item["id"].(*types.AttributeValueMemberS); ok {
					m.InFlightAtCutoff = append(m.InFlightAtCutoff, idv.Value)
				}
			}
		}
		line, err := EncodeItem(item)
		if err != nil {
			return err
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
		m.ItemCount++
		return nil
	}
	err = s.Store.ProfileKeys(ctx, profile, func(keys []map[string]types.AttributeValue) error {
		for _, k := range keys {
			item, err := s.Store.GetRaw(ctx, k)
			if err != nil {
				return err
			}
			if len(item) == 0 {
				continue // deleted since the index was read
			}
			if ref, ok := item["payloadRef"].(*types.AttributeValueMemberS); ok && ref.Value != "" {
				if h, ok := item["payloadHash"].(*types.AttributeValueMemberS); ok {
					refs[ref.Value] = h.Value
				}
			}
			if st, ok := item["status"].(*types.AttributeValueMemberS); ok && core.Status(st.Value) == core.StatusInFlight {
				inflight = append(inflight, item) // settled after the copy
				continue
			}
			if err := add(item); err != nil {
				return err
			}
		}
		if s.Progress != nil {
			s.Progress(id, m.ItemCount)
		}
		return nil
	})
	if err == nil {
		for _, item := range inflight {
			if err = add(s.settleInFlight(ctx, item)); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", profile, err)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	m.ItemsSHA256, m.ItemsBytes = hex.EncodeToString(sum[:]), int64(buf.Len())
	sort.Strings(m.InFlightAtCutoff)
	if _, err := s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(m.ItemsObject),
		Body: bytes.NewReader(buf.Bytes()), ContentType: aws.String("application/gzip")}); err != nil {
		return nil, fmt.Errorf("upload items: %w", err)
	}
	if err := s.backupPayloads(ctx, m, refs); err != nil {
		return nil, err
	}
	m.CompletedAt = s.Clock.Now()
	m.Seal(key)
	mb, _ := json.MarshalIndent(m, "", "  ")
	if _, err := s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(prefix(id) + "manifest.json"),
		Body: bytes.NewReader(mb), ContentType: aws.String("application/json")}); err != nil {
		return nil, fmt.Errorf("upload manifest: %w", err)
	}
	s.log().InfoContext(ctx, "backup complete", "backup", id, "profile", profile, "items", m.ItemCount, "inFlightAtCutoff", len(m.InFlightAtCutoff))
	return m, nil
}

// settleInFlight decides what the snapshot holds for an intent read in
// flight. A claim is checked against the barrier right after it is written
// (core.BarrierCheck), so an attempt claimed after the raise is given back
// unsent ("held-by-barrier") moments later. Re-read once the copy is done:
// if the attempt seen in flight was given back, the fresh item (which says
// nothing was sent) goes into the snapshot; otherwise the attempt really was
// in flight at the cutoff and the item is kept as read.
func (s *Service) settleInFlight(ctx context.Context, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	seen, err := dynamo.UnmarshalIntent(item)
	if err != nil {
		return item
	}
	key := map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]}
	for try := 0; try < 5; try++ {
		fresh, err := s.Store.GetRaw(ctx, key)
		if err != nil || len(fresh) == 0 {
			return item
		}
		in, err := dynamo.UnmarshalIntent(fresh)
		if err != nil {
			return item
		}
		held := false
		for _, a := range in.Attempts {
			if a.N == seen.AttemptCount && a.Result == core.ResultHeldByBarrier {
				held = true
			}
		}
		if !held {
			return item
		}
		if in.Status != core.StatusInFlight {
			return fresh
		}
		// Claimed again behind the barrier: that claim is given back too.
		seen = in
		item = fresh
		time.Sleep(20 * time.Millisecond)
	}
	return item
}

// Manifest reads and verifies a snapshot's manifest.
func (s *Service) Manifest(ctx context.Context, id string) (*Manifest, error) {
	if !strings.HasPrefix(id, "bk_") || strings.ContainsAny(id, "/.") {
		return nil, &core.ValidationError{Code: core.CodeInvalidField, Field: "backupId", Message: "not a backup id"}
	}
	key, err := s.key()
	if err != nil {
		return nil, err
	}
	b, err := s.get(ctx, prefix(id)+"manifest.json")
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest is not valid JSON", ErrInvalidSnapshot)
	}
	return &m, VerifyManifest(&m, id, key)
}

// VerifyManifest checks a manifest's format, identity, checksum and
// signature under key; every failure is ErrInvalidSnapshot.
func VerifyManifest(m *Manifest, id string, key []byte) error {
	switch {
	case m.Format != ManifestFormat:
		return fmt.Errorf("%w: manifest format %d is not %d (signed): an unsigned snapshot is never restored", ErrInvalidSnapshot, m.Format, ManifestFormat)
	case m.Signature == "":
		return fmt.Errorf("%w: the manifest is not signed", ErrInvalidSnapshot)
	case !hmac.Equal([]byte(m.Signature), []byte(m.Sign(key))):
		return fmt.Errorf("%w: the manifest's signature does not match this deployment's backup key (edited, or signed with another key)", ErrInvalidSnapshot)
	case m.BackupID != id || m.ManifestSHA256 != m.checksum():
		return fmt.Errorf("%w: manifest checksum or identity does not match", ErrInvalidSnapshot)
	}
	return nil
}

func (s *Service) get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read %s: %v", ErrInvalidSnapshot, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrInvalidSnapshot, key, err)
	}
	return b, nil
}

// RestoreReport counts what a restore did (the admin API's body,
// client.RestoreReport).
type RestoreReport = client.RestoreReport

// Restore verifies the snapshot completely, then writes every item the table
// does not already hold (existing items are newer facts and win), turning
// uncertain intents into Unknown Outcome / needs-human per restore.PlanRestore.
// Running it twice gives the same state.
func (s *Service) Restore(ctx context.Context, id string) (*RestoreReport, error) {
	m, err := s.Manifest(ctx, id)
	if err != nil {
		return nil, err
	}
	dec, err := s.openObject(ctx, m.ItemsObject, m.ItemsBytes, m.ItemsSHA256, "items")
	if err != nil {
		return nil, err
	}
	var items []map[string]types.AttributeValue
	for {
		var raw map[string]json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: item %d: %v", ErrInvalidSnapshot, len(items)+1, err)
		}
		item, err := DecodeItem(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: item %d: %v", ErrInvalidSnapshot, len(items)+1, err)
		}
		items = append(items, item)
	}
	if len(items) != m.ItemCount {
		return nil, fmt.Errorf("%w: %d items, the manifest says %d", ErrInvalidSnapshot, len(items), m.ItemCount)
	}
	// A restore writes only what the profile owns: its intents, their
	// history pages and its sources. Anything else (a token, a grant, a
	// capability, another bot's intent, a gate) refuses the whole restore.
	if err := CheckOwned(m.Profile, items); err != nil {
		return nil, err
	}
	payloadLines, err := s.readPayloads(ctx, m)
	if err != nil {
		return nil, err
	}
	// Verified. Only now does anything get written: payload objects first
	// (content-addressed, so rewriting one is harmless), then the items
	// that reference them.
	for _, pl := range payloadLines {
		if err := s.Payloads.PutObject(ctx, pl.Ref, pl.Data); err != nil {
			return nil, fmt.Errorf("restore payload %s: %w", pl.Ref, err)
		}
	}
	rep := &RestoreReport{BackupID: id, Profile: m.Profile, Items: len(items), Outcomes: map[string]int{}, Reconciled: []string{}}
	now := s.Clock.Now()
	var toReconcile []string
	for _, item := range items {
		if sk, ok := item["sk"].(*types.AttributeValueMemberS); ok && sk.Value == "INTENT" {
			in, err := dynamo.UnmarshalIntent(item)
			if err != nil {
				return rep, err
			}
			caps := s.Dispatcher.Capabilities(ctx, in)
			outcome, err := restore.PlanRestore(in, m.BarrierAt, now, caps)
			if err != nil {
				return rep, fmt.Errorf("plan restore of %s: %w", in.ID, err)
			}
			if in.Status == core.StatusUnknownOutcome {
				due := core.ReconcileDue(in, s.Dispatcher.Policy.Reconcile)
				in.NextAttemptAt = &due
			}
			// History pages the plan's entry moved out are written with the
			// intent, in one transaction, only if the intent is.
			written, err := s.Store.RestoreIntent(ctx, in, now)
			if err != nil {
				return rep, err
			}
			if !written {
				rep.KeptExisting++
				continue
			}
			rep.Written++
			rep.Outcomes[outcome]++
			if outcome == restore.RestoreReconcile {
				toReconcile = append(toReconcile, in.ID)
			}
			continue
		}
		written, err := s.Store.PutIfAbsent(ctx, item)
		if err != nil {
			return rep, err
		}
		if written {
			rep.Written++
		} else {
			rep.KeptExisting++
		}
	}
	for _, iid := range toReconcile {
		if err := s.Dispatcher.Reconcile(ctx, iid); err != nil {
			// It stays unknown-outcome; the sweeper re-enqueues reconciliation.
			s.log().WarnContext(ctx, "reconcile after restore failed; the sweeper retries", "intent", iid, "err", err.Error())
			continue
		}
		rep.Reconciled = append(rep.Reconciled, iid)
	}
	s.log().InfoContext(ctx, "restore complete", "backup", id, "profile", m.Profile, "written", rep.Written, "kept", rep.KeptExisting)
	return rep, nil
}

// backupPayloads copies the claim-checked payloads the snapshot's intents
// reference into the snapshot. A payload whose object is gone (expired) is
// counted, not fatal: the intent's own record says what it was.
func (s *Service) backupPayloads(ctx context.Context, m *Manifest, refs map[string]string) error {
	if len(refs) == 0 {
		return nil
	}
	if s.Payloads == nil {
		return fmt.Errorf("snapshot %s: %d intents keep their payload out of the item, but no payload store is configured", m.BackupID, len(refs))
	}
	keys := make([]string, 0, len(refs))
	for r := range refs {
		keys = append(keys, r)
	}
	sort.Strings(keys)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	for _, ref := range keys {
		b, err := s.Payloads.GetObject(ctx, ref)
		if errors.Is(err, core.ErrPayloadMissing) {
			m.PayloadsMissing++
			continue
		}
		if err != nil {
			return fmt.Errorf("snapshot payload %s: %w", ref, err)
		}
		if err := enc.Encode(payloadLine{Ref: ref, Hash: refs[ref], Data: b}); err != nil {
			return err
		}
		m.PayloadCount++
	}
	if err := zw.Close(); err != nil {
		return err
	}
	sum := sha256.Sum256(buf.Bytes())
	m.PayloadsObject = prefix(m.BackupID) + "payloads.jsonl.gz"
	m.PayloadsSHA256, m.PayloadsBytes = hex.EncodeToString(sum[:]), int64(buf.Len())
	if _, err := s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(m.PayloadsObject),
		Body: bytes.NewReader(buf.Bytes()), ContentType: aws.String("application/gzip")}); err != nil {
		return fmt.Errorf("upload payloads: %w", err)
	}
	return nil
}

// openObject fetches a snapshot object, checks it against the manifest's
// size and checksum, and returns a decoder of its gzip JSON Lines; what names
// the object in errors.
func (s *Service) openObject(ctx context.Context, key string, size int64, sha, what string) (*json.Decoder, error) {
	data, err := s.get(ctx, key)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != size || hex.EncodeToString(sum[:]) != sha {
		return nil, fmt.Errorf("%w: %s object does not match the manifest's size and checksum", ErrInvalidSnapshot, what)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s object is not gzip", ErrInvalidSnapshot, what)
	}
	return json.NewDecoder(zr), nil
}

// readPayloads reads and verifies a snapshot's payload objects: the object
// matches the manifest's size and checksum, and every payload hashes to the
// hash it is filed under. Nothing is written.
func (s *Service) readPayloads(ctx context.Context, m *Manifest) ([]payloadLine, error) {
	if m.PayloadsObject == "" {
		return nil, nil
	}
	if s.Payloads == nil {
		return nil, fmt.Errorf("snapshot %s carries %d payloads but no payload store is configured to restore them into", m.BackupID, m.PayloadCount)
	}
	dec, err := s.openObject(ctx, m.PayloadsObject, m.PayloadsBytes, m.PayloadsSHA256, "payloads")
	if err != nil {
		return nil, err
	}
	var out []payloadLine
	for {
		var pl payloadLine
		err := dec.Decode(&pl)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: payload %d: %v", ErrInvalidSnapshot, len(out)+1, err)
		}
		if err := core.VerifyPayload(pl.Hash, pl.Data); err != nil {
			return nil, fmt.Errorf("%w: payload %s: %v", ErrInvalidSnapshot, pl.Ref, err)
		}
		if want, err := payloads.Ref(pl.Hash); err != nil || pl.Ref != want {
			return nil, fmt.Errorf("%w: payload %s is filed under the wrong address", ErrInvalidSnapshot, pl.Ref)
		}
		out = append(out, pl)
	}
	if len(out) != m.PayloadCount {
		return nil, fmt.Errorf("%w: %d payloads, the manifest says %d", ErrInvalidSnapshot, len(out), m.PayloadCount)
	}
	return out, nil
}

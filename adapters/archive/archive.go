// Package archive keeps the full record of pruned intents (issue 27): when
// the table's TTL deletes a terminal intent, the pruner writes what it was —
// every attempt with its evidence, every decision, every webhook binding —
// to S3 as gzip-compressed JSON Lines, one object per stream batch (never one
// per intent), partitioned by date:
//
//	intents/dt=<YYYY-MM-DD>/<batch>.jsonl.gz
//
// A tombstone locates its record as "<key>#<line>" (line numbers from 1).
// The batch name is derived from the batch's first stream record, so a
// retried batch lands on the same object; an object that already exists is
// never rewritten (a retry after the history pages were deleted would
// otherwise archive less than the first write did).
package archive

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/botharness/outbox/core"
)

// Prefix is where archived records live in the bucket (the lifecycle rule's filter).
const Prefix = "intents/"

// API is the part of the S3 client the archive uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
}

// Record is one archived intent: the intent with its whole history (pages
// merged back in, oldest first) and its webhook bindings listed apart.
type Record struct {
	Intent *core.Intent `json:"intent"`
	// WebhookBindings are the provider events bound to the intent
	// (acknowledgements, delivery statuses, echoes), also among its attempts.
	WebhookBindings []core.Attempt `json:"webhookBindings"`
	EndedAt         time.Time      `json:"endedAt"`
	PrunedAt        time.Time      `json:"prunedAt"`
}

// Store writes and reads archive objects.
type Store struct {
	s3     API
	bucket string
}

// New returns the archive on bucket.
func New(api API, bucket string) *Store { return &Store{s3: api, bucket: bucket} }

// BatchKey is the object key of the batch whose first stream record is
// (source, firstSeq), archived on day.
func BatchKey(day time.Time, source, firstSeq string) string {
	h := sha256.Sum256([]byte(source + "\x00" + firstSeq))
	return Prefix + "dt=" + day.UTC().Format("2006-01-02") + "/" + hex.EncodeToString(h[:8]) + ".jsonl.gz"
}

// Location is how a tombstone names line n (from 1) of object key.
func Location(key string, n int) string { return key + "#" + strconv.Itoa(n) }

// PutBatch writes records as one gzip JSON Lines object at key, unless an
// object is already there (a retried batch). One PutObject per batch.
func (s *Store) PutBatch(ctx context.Context, key string, records []Record) error {
	_, err := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err == nil {
		return nil
	}
	if !notFound(err) {
		return fmt.Errorf("archive: head %s: %w", key, err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	for _, r := range records {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("archive: encode %s: %w", r.Intent.ID, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("archive: gzip: %w", err)
	}
	_, err = s.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes()),
		ContentType: aws.String("application/x-ndjson"), ContentEncoding: aws.String("gzip"),
	})
	if err != nil {
		return fmt.Errorf("archive: put %s: %w", key, err)
	}
	return nil
}

// Read returns the archived record at location ("<key>#<line>").
func (s *Store) Read(ctx context.Context, location string) (*Record, error) {
	key, ln, ok := strings.Cut(location, "#")
	n, err := strconv.Atoi(ln)
	if !ok || err != nil || n < 1 {
		return nil, fmt.Errorf("archive: bad location %q", location)
	}
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("archive %s: %w", location, core.ErrNotFound)
		}
		return nil, fmt.Errorf("archive: get %s: %w", key, err)
	}
	defer out.Body.Close()
	zr, err := gzip.NewReader(out.Body)
	if err != nil {
		return nil, fmt.Errorf("archive: gunzip %s: %w", key, err)
	}
	dec := json.NewDecoder(zr)
	for i := 1; ; i++ {
		var r Record
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("archive %s: %w", location, core.ErrNotFound)
			}
			return nil, fmt.Errorf("archive: decode %s: %w", key, err)
		}
		if i == n {
			return &r, nil
		}
	}
}

func notFound(err error) bool {
	var nf *s3types.NotFound
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nsk) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NotFound", "NoSuchKey", "404":
			return true
		}
	}
	return false
}

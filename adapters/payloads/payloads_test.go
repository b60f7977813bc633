package payloads

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botharness/outbox/adapters/awsconfig"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/emulatortest"
)

// counting counts the S3 requests the store makes.
type counting struct {
	API
	puts, gets atomic.Int64
}

func (c *counting) PutObject(ctx context.Context, in *s3.PutObjectInput, o ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.puts.Add(1)
	return c.API.PutObject(ctx, in, o...)
}

func (c *counting) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c.gets.Add(1)
	return c.API.GetObject(ctx, in, o...)
}

// bucketForTest creates a fresh bucket on the S3 emulator (fauxqs).
func bucketForTest(t *testing.T) (*s3.Client, string) {
	t.Helper()
	emulatortest.Require(t, "S3")
	clients, err := awsconfig.LoadClients(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	bucket := "payloads-" + hex.EncodeToString(b[:])
	if _, err := clients.S3.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return clients.S3, bucket
}

func payload(n int) ([]byte, string) {
	b := []byte(`{"text":"` + strings.Repeat("p", n) + `"}`)
	return b, core.HashBytes(b)
}

// The payload store contract, against the real S3 API of the emulator.
func TestPayloadStoreContract(t *testing.T) {
	cli, bucket := bucketForTest(t)
	ctx := context.Background()
	api := &counting{API: cli}
	st := New(api, bucket, 8)
	b, hash := payload(200 << 10)

	t.Run("put is content-addressed and repeatable", func(t *testing.T) {
		ref, err := st.Put(ctx, hash, b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := st.Put(ctx, hash, b)
		if err != nil || again != ref {
			t.Fatalf("second put: %q %v, want %q", again, err, ref)
		}
		if want := "payloads/sha256/" + strings.TrimPrefix(hash, "sha256:"); ref != want {
			t.Fatalf("ref %q, want %q", ref, want)
		}
	})
	t.Run("get returns the bytes, reading S3 once per instance", func(t *testing.T) {
		ref, _ := Ref(hash)
		before := api.gets.Load()
		for i := 0; i < 3; i++ {
			got, err := st.Get(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if err := core.VerifyPayload(hash, got); err != nil {
				t.Fatal(err)
			}
		}
		if n := api.gets.Load() - before; n != 1 {
			t.Fatalf("%d S3 GETs for 3 reads, want 1", n)
		}
	})
	t.Run("missing object is ErrPayloadMissing", func(t *testing.T) {
		_, other := payload(10)
		ref, _ := Ref(other)
		if _, err := st.Get(ctx, ref); !errors.Is(err, core.ErrPayloadMissing) {
			t.Fatalf("err %v, want ErrPayloadMissing", err)
		}
	})
	t.Run("a tampered object fails verification", func(t *testing.T) {
		tb, th := payload(5000)
		ref, err := st.Put(ctx, th, tb)
		if err != nil {
			t.Fatal(err)
		}
		evil := append([]byte(nil), tb...)
		evil[12] = 'X'
		if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(ref), Body: strings.NewReader(string(evil))}); err != nil {
			t.Fatal(err)
		}
		fresh := New(cli, bucket, 0) // another instance: no cache
		got, err := fresh.Get(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := core.VerifyPayload(th, got); !errors.Is(err, core.ErrPayloadTampered) {
			t.Fatalf("verification of a tampered object: %v", err)
		}
	})
	t.Run("refs outside the payload prefix are refused", func(t *testing.T) {
		if _, err := st.Get(ctx, "backups/x/manifest.json"); !errors.Is(err, core.ErrPayloadMissing) {
			t.Fatalf("err %v", err)
		}
		if _, err := Ref("md5:abc"); err == nil {
			t.Fatal("a non-sha256 hash was accepted")
		}
	})
}

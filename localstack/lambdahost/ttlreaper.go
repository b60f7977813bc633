package lambdahost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TTL deletes, locally (issue 27; docs/decisions.md "Retention locally").
//
// AWS's TTL service deletes an expired item some time after its expiry and
// writes a stream record with eventName REMOVE and userIdentity {type:
// Service, principalId: dynamodb.amazonaws.com}. The pinned DynamoDB Local
// deletes expired items too, but not dependably (within ~10 s when quiet,
// not within 45 s beside busy tables), and names its record "UNKNOWN_TO_SDK_VERSION" without a userIdentity
// (AWSShape presents it as AWS does). The local host also runs a TTLReaper,
// which is faster (tests sweep every 200 ms) and follows an injected clock
// (chaos): every interval it scans for items whose TTL
// attribute has passed and deletes each one conditionally on that same
// expiry (a rewritten item is left alone). The delete's stream record is an
// ordinary REMOVE; the stream pollers ask the reaper (StreamPollerConfig.
// TTLDeletes) and present the records it caused exactly as AWS presents a
// TTL delete, so the pruner's filter and handler see what AWS sends.

// TTLPrincipal is the userIdentity.principalId AWS puts on TTL deletes.
const TTLPrincipal = "dynamodb.amazonaws.com"

// DefaultTTLDeleters: a sweep's deletes go out side by side, so a sweep's
// stream records come as one burst, as AWS's TTL service deletes in
// background bursts. One by one, a sweep of 1,000 expired items on a loaded
// machine spread its records over more than the pruner mapping's 30 s
// batching window, and the pruner archived them in several objects where
// AWS writes one (archive_s3_puts_per_1000_pruned 15 against a goal of 10;
// bench/cmd/outbox-bench retention, TestReaperSweepIsOneBurst).
const DefaultTTLDeleters = 16

// TTLReaperAPI is the part of the DynamoDB client the reaper uses.
type TTLReaperAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// TTLReaperConfig configures a TTLReaper.
type TTLReaperConfig struct {
	DynamoDB  TTLReaperAPI
	TableName string
	// Attribute is the table's TTL attribute (epoch seconds).
	Attribute string
	// Interval between sweeps (OUTBOX_TTL_REAPER_INTERVAL; default 15s).
	Interval time.Duration
	// Deleters is how many deletes of one sweep are in flight at once
	// (default DefaultTTLDeleters).
	Deleters int
	// Now is the wall clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// TTLReaper plays DynamoDB's TTL service for the local host.
type TTLReaper struct {
	cfg TTLReaperConfig
	log *slog.Logger

	mu     sync.Mutex
	reaped map[string]time.Time // pk, sk, expiry -> when reaped
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewTTLReaper returns a stopped reaper.
func NewTTLReaper(cfg TTLReaperConfig) (*TTLReaper, error) {
	if cfg.DynamoDB == nil || cfg.TableName == "" || cfg.Attribute == "" {
		return nil, errors.New("host: TTLReaperConfig needs DynamoDB, TableName and Attribute")
	}
	cfg.Interval = orDefault(cfg.Interval, 15*time.Second)
	cfg.Deleters = orDefault(cfg.Deleters, DefaultTTLDeleters)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &TTLReaper{cfg: cfg, log: loggerOr(cfg.Logger).With("component", "ttl-reaper", "table", cfg.TableName), reaped: map[string]time.Time{}}, nil
}

// Start sweeps every interval until Stop.
func (r *TTLReaper) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		every(ctx, r.cfg.Interval, nil, func() {
			if n, err := r.ReapOnce(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("ttl sweep failed", "error", err)
			} else if n > 0 {
				r.log.Debug("ttl sweep", "deleted", n)
			}
		})
	}()
}

// Stop ends the sweeps and waits for the current one.
func (r *TTLReaper) Stop() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
}

func reapKey(pk, sk, exp string) string { return pk + "\x00" + sk + "\x00" + exp }

// ReapOnce deletes every item whose TTL attribute is at or before now and
// returns how many it deleted.
func (r *TTLReaper) ReapOnce(ctx context.Context) (int, error) {
	now := r.cfg.Now()
	r.gc(now)
	names := map[string]string{"#t": r.cfg.Attribute}
	vals := map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}}
	var start map[string]types.AttributeValue
	n := 0
	for {
		out, err := r.cfg.DynamoDB.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(r.cfg.TableName), FilterExpression: aws.String("#t <= :now"),
			ProjectionExpression: aws.String("pk, sk, #t"), ExpressionAttributeNames: names,
			ExpressionAttributeValues: vals, ExclusiveStartKey: start,
		})
		if err != nil {
			return n, fmt.Errorf("ttl scan: %w", err)
		}
		deleted, err := r.deletePage(ctx, out.Items, names, now)
		n += deleted
		if err != nil {
			return n, err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		start = out.LastEvaluatedKey
	}
}

// deletePage deletes one scan page's expired items, Deleters at a time,
// each conditionally on the expiry the scan saw (an item rewritten since is
// not expired). It returns how many it deleted and the first error that is
// not such a lost condition.
func (r *TTLReaper) deletePage(ctx context.Context, items []map[string]types.AttributeValue, names map[string]string, now time.Time) (int, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		n        int
		firstErr error
	)
	sem := make(chan struct{}, r.cfg.Deleters)
	for _, item := range items {
		pk, _ := item["pk"].(*types.AttributeValueMemberS)
		sk, _ := item["sk"].(*types.AttributeValueMemberS)
		exp, _ := item[r.cfg.Attribute].(*types.AttributeValueMemberN)
		if pk == nil || sk == nil || exp == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			k := reapKey(pk.Value, sk.Value, exp.Value)
			r.mu.Lock()
			r.reaped[k] = now // before the delete: its stream record may be read at once
			r.mu.Unlock()
			_, err := r.cfg.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName:                 aws.String(r.cfg.TableName),
				Key:                       map[string]types.AttributeValue{"pk": pk, "sk": sk},
				ConditionExpression:       aws.String("#t = :t"),
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: map[string]types.AttributeValue{":t": exp},
			})
			if err != nil {
				r.mu.Lock()
				delete(r.reaped, k)
				r.mu.Unlock()
				var ccf *types.ConditionalCheckFailedException
				if !errors.As(err, &ccf) {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("ttl delete: %w", err)
					}
					mu.Unlock()
				}
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return n, firstErr
}

// gc forgets deletes every poller has long since read.
func (r *TTLReaper) gc(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range r.reaped {
		if now.Sub(at) > 10*time.Minute {
			delete(r.reaped, k)
		}
	}
}

// IsTTLDelete reports whether rec is the stream record of a delete this
// reaper made (a StreamPollerConfig.TTLDeletes).
func (r *TTLReaper) IsTTLDelete(rec events.DynamoDBEventRecord) bool {
	if rec.EventName != "REMOVE" {
		return false
	}
	pk, ok1 := rec.Change.Keys["pk"]
	sk, ok2 := rec.Change.Keys["sk"]
	exp, ok3 := rec.Change.OldImage[r.cfg.Attribute]
	if !ok1 || !ok2 || !ok3 || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString || exp.DataType() != events.DataTypeNumber {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.reaped[reapKey(pk.String(), sk.String(), exp.Number())]
	return ok
}

// AWSShape presents a TTL delete's record as AWS writes it: eventName REMOVE
// and userIdentity Service/dynamodb.amazonaws.com. It rewrites DynamoDB
// Local's own TTL record (eventName "UNKNOWN_TO_SDK_VERSION", an old image
// and no new one) and, with ttl set, the records of the reaper's deletes.
func AWSShape(ev events.DynamoDBEventRecord, ttl func(events.DynamoDBEventRecord) bool) events.DynamoDBEventRecord {
	switch {
	case ev.EventName == "UNKNOWN_TO_SDK_VERSION" && len(ev.Change.NewImage) == 0 && len(ev.Change.OldImage) > 0:
	case ev.EventName == "REMOVE" && ev.UserIdentity == nil && ttl != nil && ttl(ev):
	default:
		return ev
	}
	ev.EventName = "REMOVE"
	ev.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: TTLPrincipal}
	return ev
}

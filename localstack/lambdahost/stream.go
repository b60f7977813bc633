package lambdahost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/botharness/outbox/localstack/lambdahost/streamfilter"
)

// DescribeTableAPI is the part of the DynamoDB client the stream poller uses
// to find a table's latest stream.
type DescribeTableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// StreamsAPI is the part of the DynamoDB Streams client the stream poller uses.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// NewStreamsClient returns a DynamoDB Streams client for cfg. When neither
// AWS_ENDPOINT_URL_DYNAMODB_STREAMS nor AWS_ENDPOINT_URL is set but
// AWS_ENDPOINT_URL_DYNAMODB is, it uses the DynamoDB endpoint, because
// DynamoDB Local serves the Streams API on the same port.
func NewStreamsClient(cfg aws.Config, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	ddbEndpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if ddbEndpoint != "" && os.Getenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS") == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		optFns = append([]func(*dynamodbstreams.Options){func(o *dynamodbstreams.Options) {
			if o.BaseEndpoint == nil {
				o.BaseEndpoint = aws.String(ddbEndpoint)
			}
		}}, optFns...)
	}
	return dynamodbstreams.NewFromConfig(cfg, optFns...)
}

// StartingPosition is where a stream poller starts reading the shards that
// exist when it first starts. Shards that appear later are always read from
// their beginning, as Lambda does.
type StartingPosition string

const (
	StartLatest      StartingPosition = "LATEST"
	StartTrimHorizon StartingPosition = "TRIM_HORIZON"
)

// StreamFailure describes records a stream poller gave up on after the retry
// budget, like the on-failure destination of an event source mapping (which,
// unlike this, receives only metadata).
type StreamFailure struct {
	StreamArn string
	ShardID   string // empty for Deliver
	Records   []events.DynamoDBEventRecord
	Attempts  int   // invocations made for the first failed record
	Err       error // the last handler error, nil when it reported batch item failures
}

// StreamPollerConfig configures a StreamPoller.
type StreamPollerConfig struct {
	DynamoDB DescribeTableAPI // used only when StreamArn is empty
	Streams  StreamsAPI
	// TableName selects the table whose LatestStreamArn is polled; or set
	// StreamArn directly.
	TableName string
	StreamArn string

	// FilterPattern is one event-filtering pattern (for example
	// dispatcher.StreamFilterPattern); empty delivers every record. Records
	// that do not match are dropped, as Lambda does.
	FilterPattern string
	// BatchSize caps records per invocation (default 100, Lambda's default).
	BatchSize int
	// StartingPosition for the shards present at the first Start (default
	// LATEST).
	StartingPosition StartingPosition
	// PollInterval is the pause after an empty GetRecords (default 100ms).
	PollInterval time.Duration
	// ShardRefreshInterval is how often DescribeStream looks for new shards
	// (default 1s; a closed shard also triggers a refresh).
	ShardRefreshInterval time.Duration
	// MaxRetryAttempts bounds retries of a failing record (handler error or
	// listed in batchItemFailures). 0 means the default, 3; negative means
	// no retries. After that the records from the failing one to the end of
	// the batch go to OnFailure and the shard moves on.
	MaxRetryAttempts int
	// RetryDelay is the pause before a retry (default PollInterval).
	RetryDelay time.Duration
	// OnFailure receives records given up on; default: log them (IDs only).
	OnFailure func(ctx context.Context, f StreamFailure)

	Handler StreamHandler

	// BatchingWindow, when positive, plays the mapping's
	// MaximumBatchingWindowInSeconds: matching records are gathered (across
	// GetRecords pages) until BatchSize of them or the window since the
	// first one, then delivered as one batch. 0: every page is delivered as
	// it is read.
	BatchingWindow time.Duration

	// TTLDeletes recognises the records of the local TTL reaper's deletes
	// (TTLReaper.IsTTLDelete); they and DynamoDB Local's own TTL records are
	// presented as AWS writes a TTL delete (AWSShape). nil: only the latter.
	TTLDeletes func(events.DynamoDBEventRecord) bool

	// Region overrides the awsRegion of records (DynamoDB Local reports
	// "ddblocal"); default: whatever the stream says.
	Region          string
	AccountID       string
	FunctionName    string
	FunctionTimeout time.Duration
	Logger          *slog.Logger
}

// StreamPoller plays a DynamoDB Streams event source mapping: it reads every
// shard of a table's stream (parents before children), converts records to
// events.DynamoDBEventRecord, applies the filter pattern, invokes the handler
// with batches, and honours batchItemFailures (ReportBatchItemFailures) with a
// bounded retry budget. Within one poller's life a record is delivered once
// unless the handler asked for a retry or Deliver replays it.
type StreamPoller struct {
	cfg    StreamPollerConfig
	log    *slog.Logger
	filter *streamfilter.Pattern

	lifecycle // mu guards what follows
	streamArn string
	shards    map[string]*shardState
	firstRun  bool
	refresh   chan struct{}
}

type shardState struct {
	id         string
	parent     string
	start      streamtypes.ShardIteratorType // when there is no checkpoint
	checkpoint string                        // last sequence number handled
	started    bool                          // a worker owns it
	done       bool                          // closed and fully handled
	// pending holds matching records gathered for BatchingWindow (the
	// shard's own goroutine only).
	pending      []events.DynamoDBEventRecord
	pendingSince time.Time
}

// NewStreamPoller validates cfg and returns a stopped poller.
func NewStreamPoller(cfg StreamPollerConfig) (*StreamPoller, error) {
	if cfg.Handler == nil {
		return nil, errors.New("host: StreamPollerConfig.Handler is required")
	}
	if cfg.Streams == nil {
		return nil, errors.New("host: StreamPollerConfig.Streams is required")
	}
	if cfg.StreamArn == "" && (cfg.DynamoDB == nil || cfg.TableName == "") {
		return nil, errors.New("host: set StreamArn, or DynamoDB and TableName")
	}
	cfg.BatchSize = orDefault(cfg.BatchSize, 100)
	if cfg.BatchSize < 1 || cfg.BatchSize > 10000 {
		return nil, fmt.Errorf("host: BatchSize %d out of range 1..10000", cfg.BatchSize)
	}
	cfg.StartingPosition = orDefault(cfg.StartingPosition, StartLatest)
	if cfg.StartingPosition != StartLatest && cfg.StartingPosition != StartTrimHorizon {
		return nil, fmt.Errorf("host: unsupported StartingPosition %q", cfg.StartingPosition)
	}
	cfg.PollInterval = orDefault(cfg.PollInterval, 100*time.Millisecond)
	cfg.ShardRefreshInterval = orDefault(cfg.ShardRefreshInterval, time.Second)
	switch {
	case cfg.MaxRetryAttempts == 0:
		cfg.MaxRetryAttempts = 3
	case cfg.MaxRetryAttempts < 0:
		cfg.MaxRetryAttempts = 0
	}
	cfg.RetryDelay = orDefault(cfg.RetryDelay, cfg.PollInterval)
	cfg.AccountID = orDefault(cfg.AccountID, DefaultAccountID)
	p := &StreamPoller{
		cfg:       cfg,
		log:       loggerOr(cfg.Logger).With("component", "stream-poller", "table", cfg.TableName),
		shards:    map[string]*shardState{},
		firstRun:  true,
		streamArn: cfg.StreamArn,
	}
	if cfg.FilterPattern != "" {
		f, err := streamfilter.Compile(cfg.FilterPattern)
		if err != nil {
			return nil, err
		}
		p.filter = f
	}
	return p, nil
}

// StreamArn returns the stream being polled (known after Start).
func (p *StreamPoller) StreamArn() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.streamArn
}

// Start resolves the stream, positions iterators on the shards that exist now
// (so with LATEST, every write after Start returns is seen) and starts polling
// in the background until ctx is done or Stop is called. A stopped poller can
// be started again; it resumes after its checkpoints.
func (p *StreamPoller) Start(ctx context.Context) error {
	// A Stop that comes while Start is still describing the stream aborts it.
	runCtx, fail, err := p.begin(ctx, "stream poller")
	if err != nil {
		return err
	}
	if p.StreamArn() == "" {
		out, err := p.cfg.DynamoDB.DescribeTable(runCtx, &dynamodb.DescribeTableInput{TableName: aws.String(p.cfg.TableName)})
		if err != nil {
			return fail(fmt.Errorf("host: describe table %s: %w", p.cfg.TableName, err))
		}
		if out.Table == nil || aws.ToString(out.Table.LatestStreamArn) == "" {
			return fail(fmt.Errorf("host: table %s has no stream enabled", p.cfg.TableName))
		}
		p.mu.Lock()
		p.streamArn = aws.ToString(out.Table.LatestStreamArn)
		p.mu.Unlock()
	}

	shards, err := p.describeShards(runCtx)
	if err != nil {
		return fail(err)
	}
	p.mu.Lock()
	p.refresh = make(chan struct{}, 1)
	p.addShardsLocked(shards, p.firstRun)
	p.firstRun = false
	ready := p.readyLocked()
	p.mu.Unlock()

	// Position the first iterators before returning.
	iters := make(map[string]*string, len(ready))
	for _, s := range ready {
		it, err := p.initialIterator(runCtx, s)
		if err != nil {
			p.mu.Lock()
			for _, r := range ready {
				r.started = false
			}
			p.mu.Unlock()
			return fail(err)
		}
		iters[s.id] = it
	}
	p.log.Info("stream poller started", "stream", p.StreamArn(), "shards", len(shards), "position", p.cfg.StartingPosition)
	for _, s := range ready {
		p.launch(runCtx, s, iters[s.id])
	}
	p.wg.Add(1)
	go p.discoverLoop(runCtx)
	return nil
}

// Stop stops polling and waits for in-flight invocations to finish.
func (p *StreamPoller) Stop() {
	p.stop(func() {
		for _, s := range p.shards {
			s.started = false
		}
	})
}

func (p *StreamPoller) describeShards(ctx context.Context) ([]streamtypes.Shard, error) {
	var shards []streamtypes.Shard
	var start *string
	arn := p.StreamArn()
	for {
		out, err := p.cfg.Streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn:             aws.String(arn),
			ExclusiveStartShardId: start,
		})
		if err != nil {
			return nil, fmt.Errorf("host: describe stream: %w", err)
		}
		if out.StreamDescription == nil {
			return shards, nil
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return shards, nil
		}
	}
}

// addShardsLocked records newly seen shards. Shards present at the very
// first Start follow StartingPosition (with LATEST, already-closed shards
// will never get new records and are skipped); later ones start at
// TRIM_HORIZON.
func (p *StreamPoller) addShardsLocked(shards []streamtypes.Shard, initial bool) {
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if id == "" || p.shards[id] != nil {
			continue
		}
		s := &shardState{id: id, parent: aws.ToString(sh.ParentShardId), start: streamtypes.ShardIteratorTypeTrimHorizon}
		if initial && p.cfg.StartingPosition == StartLatest {
			s.start = streamtypes.ShardIteratorTypeLatest
			if sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil {
				s.done = true
			}
		}
		p.shards[id] = s
	}
}

// readyLocked marks and returns the shards a worker may start on now: not
// started, not done, and whose parent is done or unknown (trimmed).
func (p *StreamPoller) readyLocked() []*shardState {
	var ready []*shardState
	for _, s := range p.shards {
		if s.started || s.done {
			continue
		}
		if par := p.shards[s.parent]; s.parent != "" && par != nil && !par.done {
			continue
		}
		s.started = true
		ready = append(ready, s)
	}
	return ready
}

func (p *StreamPoller) nudge() {
	p.mu.Lock()
	ch := p.refresh
	p.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (p *StreamPoller) discoverLoop(ctx context.Context) {
	defer p.wg.Done()
	p.mu.Lock()
	refresh := p.refresh
	p.mu.Unlock()
	every(ctx, p.cfg.ShardRefreshInterval, refresh, func() {
		shards, err := p.describeShards(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("shard discovery failed", "error", err)
			}
			return
		}
		p.mu.Lock()
		p.addShardsLocked(shards, false)
		ready := p.readyLocked()
		p.mu.Unlock()
		for _, s := range ready {
			p.launch(ctx, s, nil)
		}
	})
}

func (p *StreamPoller) launch(ctx context.Context, s *shardState, it *string) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.runShard(ctx, s, it)
	}()
}

// initialIterator returns the iterator a shard worker starts with: after the
// checkpoint when there is one, else the shard's start position.
func (p *StreamPoller) initialIterator(ctx context.Context, s *shardState) (*string, error) {
	p.mu.Lock()
	cp, typ := s.checkpoint, s.start
	p.mu.Unlock()
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.StreamArn()), ShardId: aws.String(s.id), ShardIteratorType: typ}
	if cp != "" {
		in.ShardIteratorType = streamtypes.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(cp)
	}
	out, err := p.cfg.Streams.GetShardIterator(ctx, in)
	var trimmed *streamtypes.TrimmedDataAccessException
	if errors.As(err, &trimmed) && in.ShardIteratorType != streamtypes.ShardIteratorTypeTrimHorizon {
		p.log.Warn("checkpoint trimmed from the stream; restarting at TRIM_HORIZON", "shard", s.id)
		in.ShardIteratorType, in.SequenceNumber = streamtypes.ShardIteratorTypeTrimHorizon, nil
		out, err = p.cfg.Streams.GetShardIterator(ctx, in)
	}
	if err != nil {
		return nil, fmt.Errorf("host: get shard iterator %s: %w", s.id, err)
	}
	return out.ShardIterator, nil
}

func (p *StreamPoller) markDone(s *shardState) {
	p.mu.Lock()
	s.done = true
	p.mu.Unlock()
	p.nudge()
}

func (p *StreamPoller) runShard(ctx context.Context, s *shardState, it *string) {
	log := p.log.With("shard", s.id)
	backoff := p.cfg.PollInterval
	failures := 0
	errPause := func() bool {
		failures++
		d := min(backoff*time.Duration(1<<min(failures, 6)), 5*time.Second)
		return sleepCtx(ctx, d)
	}
	for ctx.Err() == nil {
		if it == nil {
			var err error
			it, err = p.initialIterator(ctx, s)
			if err != nil {
				var nf *streamtypes.ResourceNotFoundException
				if errors.As(err, &nf) {
					log.Warn("shard no longer exists", "error", err)
					p.markDone(s)
					return
				}
				if ctx.Err() == nil {
					log.Warn("get shard iterator failed", "error", err)
				}
				if !errPause() {
					return
				}
				continue
			}
			if it == nil { // nothing left to read in a closed shard
				p.markDone(s)
				return
			}
		}
		out, err := p.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(int32(p.cfg.BatchSize))})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var expired *streamtypes.ExpiredIteratorException
			var trimmed *streamtypes.TrimmedDataAccessException
			var nf *streamtypes.ResourceNotFoundException
			switch {
			case errors.As(err, &expired):
				log.Info("shard iterator expired; repositioning after checkpoint")
				it = nil
				continue
			case errors.As(err, &trimmed):
				log.Warn("records trimmed before they were read; moving to TRIM_HORIZON")
				p.mu.Lock()
				s.start = streamtypes.ShardIteratorTypeTrimHorizon
				p.mu.Unlock()
				it = nil
				continue
			case errors.As(err, &nf):
				log.Warn("shard or stream gone", "error", err)
				p.markDone(s)
				return
			case strings.Contains(err.Error(), "Invalid ShardIterator"):
				// DynamoDB Local's answer to an iterator it no longer knows.
				log.Info("shard iterator rejected; repositioning after checkpoint")
				it = nil
				if !errPause() {
					return
				}
				continue
			}
			log.Warn("get records failed", "error", err)
			if !errPause() {
				return
			}
			continue
		}
		failures = 0
		if len(out.Records) > 0 {
			if !p.handleShardRecords(ctx, s, out.Records) {
				return // stopping; the checkpoint was not advanced
			}
		} else if !p.flushPending(ctx, s, false) {
			return
		}
		if out.NextShardIterator == nil {
			if !p.flushPending(ctx, s, true) {
				return
			}
			log.Info("shard closed and fully processed")
			p.markDone(s)
			return
		}
		it = out.NextShardIterator
		if len(out.Records) == 0 && !sleepCtx(ctx, p.cfg.PollInterval) {
			return
		}
	}
}

// handleShardRecords converts, de-duplicates against the checkpoint, filters
// and delivers one GetRecords page. It reports false when the poller is
// stopping before the page was fully handled.
func (p *StreamPoller) handleShardRecords(ctx context.Context, s *shardState, recs []streamtypes.Record) bool {
	p.mu.Lock()
	cp := s.checkpoint
	p.mu.Unlock()
	arn := p.StreamArn()
	batch := make([]events.DynamoDBEventRecord, 0, len(recs))
	last := cp
	for _, r := range recs {
		seq := ""
		if r.Dynamodb != nil {
			seq = aws.ToString(r.Dynamodb.SequenceNumber)
		}
		if cp != "" && seq != "" && !seqLess(cp, seq) {
			continue // already handled (re-read after a trim or reposition)
		}
		ev, err := ConvertStreamRecord(r, arn, p.cfg.Region)
		if err != nil {
			p.log.Error("cannot convert stream record; skipping it", "shard", s.id, "event_id", aws.ToString(r.EventID), "error", err)
		} else {
			batch = append(batch, AWSShape(ev, p.cfg.TTLDeletes))
		}
		if seq != "" {
			last = seq
		}
	}
	if p.cfg.BatchingWindow > 0 {
		for _, r := range batch {
			if p.matches(r) {
				if len(s.pending) == 0 {
					s.pendingSince = time.Now()
				}
				s.pending = append(s.pending, r)
			}
		}
		p.mu.Lock()
		s.checkpoint = last
		p.mu.Unlock()
		return p.flushPending(ctx, s, false)
	}
	if err := p.process(ctx, s.id, batch); err != nil {
		return false
	}
	p.mu.Lock()
	s.checkpoint = last
	p.mu.Unlock()
	return true
}

// flushPending delivers the gathered records once BatchSize of them are
// there or the batching window since the first has passed (or force). It
// reports false when the poller is stopping.
func (p *StreamPoller) flushPending(ctx context.Context, s *shardState, force bool) bool {
	if len(s.pending) == 0 || (!force && len(s.pending) < p.cfg.BatchSize && time.Since(s.pendingSince) < p.cfg.BatchingWindow) {
		return true
	}
	batch := s.pending
	s.pending = nil
	return p.process(ctx, s.id, batch) == nil
}

// Deliver runs records through the mapping's pipeline as if they had just
// been read from the stream: the filter, batching by BatchSize, invocation,
// batchItemFailures retries and OnFailure. It runs on the caller's goroutine
// and does not touch checkpoints, so replaying records a poller already
// delivered reproduces a duplicate delivery. It returns ctx's error if ctx
// ends first.
func (p *StreamPoller) Deliver(ctx context.Context, records []events.DynamoDBEventRecord) error {
	return p.process(ctx, "", records)
}

func (p *StreamPoller) matches(r events.DynamoDBEventRecord) bool {
	if p.filter == nil {
		return true
	}
	return p.filter.Match(streamfilter.RecordForFilter(r))
}

func (p *StreamPoller) process(ctx context.Context, shardID string, records []events.DynamoDBEventRecord) error {
	kept := make([]events.DynamoDBEventRecord, 0, len(records))
	for _, r := range records {
		if p.matches(r) {
			kept = append(kept, r)
		}
	}
	if dropped := len(records) - len(kept); dropped > 0 {
		p.log.Debug("records filtered out", "shard", shardID, "count", dropped)
	}
	for len(kept) > 0 {
		n := min(len(kept), p.cfg.BatchSize)
		if err := p.deliverBatch(ctx, shardID, kept[:n]); err != nil {
			return err
		}
		kept = kept[n:]
	}
	return ctx.Err()
}

// deliverBatch invokes the handler with one batch and retries like an event
// source mapping with ReportBatchItemFailures: a handler error retries the
// whole batch; reported failures retry from the lowest failed record; an
// empty or unknown itemIdentifier fails the whole batch. The attempt count
// resets whenever the first failed record moves forward.
func (p *StreamPoller) deliverBatch(ctx context.Context, shardID string, batch []events.DynamoDBEventRecord) error {
	attempts := 0
	for len(batch) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := p.invoke(ctx, batch)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Debug("stream batch delivered", "shard", shardID, "records", len(batch),
			"first_seq", batch[0].Change.SequenceNumber, "last_seq", batch[len(batch)-1].Change.SequenceNumber, "attempt", attempts+1)
		from := -1
		if err != nil {
			from = 0
			p.log.Warn("stream handler failed", "shard", shardID, "records", len(batch), "error", err)
		} else if len(resp.BatchItemFailures) > 0 {
			from = firstFailed(batch, resp.BatchItemFailures)
			p.log.Info("stream handler reported batch item failures", "shard", shardID,
				"records", len(batch), "failures", len(resp.BatchItemFailures), "retry_from", batch[from].Change.SequenceNumber)
		}
		if from < 0 {
			return nil
		}
		if from > 0 {
			attempts = 0
		}
		attempts++
		batch = batch[from:]
		if attempts > p.cfg.MaxRetryAttempts {
			f := StreamFailure{StreamArn: p.StreamArn(), ShardID: shardID, Records: batch, Attempts: attempts, Err: err}
			if p.cfg.OnFailure != nil {
				p.cfg.OnFailure(ctx, f)
			} else {
				ids := make([]string, len(batch))
				for i, r := range batch {
					ids[i] = r.EventID
				}
				p.log.Error("giving up on stream records after retries", "shard", shardID, "attempts", attempts, "event_ids", ids, "error", err)
			}
			return nil
		}
		if !sleepCtx(ctx, p.cfg.RetryDelay) {
			return ctx.Err()
		}
	}
	return nil
}

// firstFailed returns the index of the lowest failed record, or 0 (the whole
// batch) when an identifier is empty or matches no record.
func firstFailed(batch []events.DynamoDBEventRecord, failures []events.DynamoDBBatchItemFailure) int {
	idx := make(map[string]int, len(batch))
	for i, r := range batch {
		if _, dup := idx[r.Change.SequenceNumber]; !dup {
			idx[r.Change.SequenceNumber] = i
		}
	}
	from := len(batch)
	for _, f := range failures {
		i, ok := idx[f.ItemIdentifier]
		if f.ItemIdentifier == "" || !ok {
			return 0
		}
		from = min(from, i)
	}
	return from
}

func (p *StreamPoller) invoke(ctx context.Context, batch []events.DynamoDBEventRecord) (events.DynamoDBEventResponse, error) {
	return invokeBatch(ctx, p.cfg.FunctionTimeout, functionArn(orDefault(p.cfg.Region, DefaultRegion), p.cfg.AccountID, p.cfg.FunctionName),
		events.DynamoDBEvent{Records: batch}, p.cfg.Handler)
}

// seqLess compares DynamoDB Streams sequence numbers (decimal strings).
func seqLess(a, b string) bool {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

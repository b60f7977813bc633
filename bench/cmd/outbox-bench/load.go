package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// loadResult is one closed-loop run: conc workers doing op back to back for dur.
type loadResult struct {
	Ops      int
	Errors   int
	FirstErr error
	Elapsed  time.Duration
	Lat      []time.Duration
	SelfCPU  time.Duration // CPU of this process (stack + load generator)
	EmuCPU   time.Duration // CPU of the DynamoDB Local process (0 when unknown)
	MaxRSSKB int64         // peak VmRSS of this process while the run lasted
}

// seq hands out unique sequence numbers (idempotency keys, raw item ids).
var seq atomic.Int64

// runLoad runs conc workers calling op back to back for dur and records the
// latency of every successful call.
// The workers carry the pprof label variant=<label>.
func runLoad(ctx context.Context, label string, conc int, dur time.Duration, emuPID int, sampleRSS bool, op func(ctx context.Context, n int64) error) loadResult {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		res     loadResult
		stop    atomic.Bool
		lats    = make([][]time.Duration, conc)
		errs    = make([]int, conc)
		firsts  = make([]error, conc)
		sampler *rssSampler
	)
	if sampleRSS {
		sampler = startRSSSampler(10 * time.Millisecond)
	}
	cpu0, emu0 := selfCPU(), procCPU(emuPID)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("variant", label), func(ctx context.Context) {
			defer wg.Done()
			l := make([]time.Duration, 0, 4096)
			for !stop.Load() {
				t0 := time.Now()
				err := op(ctx, seq.Add(1))
				if err != nil {
					errs[w]++
					if firsts[w] == nil {
						firsts[w] = err
					}
					continue
				}
				l = append(l, time.Since(t0))
			}
			lats[w] = l
		})
	}
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.SelfCPU, res.EmuCPU = selfCPU()-cpu0, procCPU(emuPID)-emu0
	if sampler != nil {
		res.MaxRSSKB = sampler.stop()
	}
	mu.Lock()
	defer mu.Unlock()
	for w := range conc {
		res.Lat = append(res.Lat, lats[w]...)
		res.Errors += errs[w]
		if res.FirstErr == nil {
			res.FirstErr = firsts[w]
		}
	}
	res.Ops = len(res.Lat)
	return res
}

// agg accumulates the rounds of one measured variant.
type agg struct {
	Ops, Errors int
	FirstErr    error
	Elapsed     time.Duration
	Lat         []time.Duration
	SelfCPU     time.Duration
	EmuCPU      time.Duration
	MaxRSSKB    int64
}

func (a *agg) add(r loadResult) {
	a.Ops += r.Ops
	a.Errors += r.Errors
	if a.FirstErr == nil {
		a.FirstErr = r.FirstErr
	}
	a.Elapsed += r.Elapsed
	a.Lat = append(a.Lat, r.Lat...)
	a.SelfCPU += r.SelfCPU
	a.EmuCPU += r.EmuCPU
	a.MaxRSSKB = max(a.MaxRSSKB, r.MaxRSSKB)
}

func (a *agg) perSec() float64 {
	if a.Elapsed <= 0 {
		return 0
	}
	return float64(a.Ops) / a.Elapsed.Seconds()
}

// cpuPerOp is CPU microseconds per successful op.
func cpuPerOp(d time.Duration, ops int) float64 {
	if ops == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(ops)
}

// pct returns the p-th percentile (nearest rank) in milliseconds.
func pct(lat []time.Duration, p float64) float64 {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

func meanMS(lat []time.Duration) float64 {
	if len(lat) == 0 {
		return 0
	}
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(lat))
}

// selfCPU is user+system CPU of this process (all threads).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is user+system CPU of another process from /proc/<pid>/stat
// (clock ticks, USER_HZ = 100 on Linux).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After ")": state(3) ... utime is field 14, stime 15 (1-based over the whole line).
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procStatusKB reads a "VmXXX:  N kB" line of /proc/self/status.
func procStatusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, field+":") {
			fs := strings.Fields(line[len(field)+1:])
			if len(fs) > 0 {
				n, _ := strconv.ParseInt(fs[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

type rssSampler struct {
	done chan struct{}
	out  chan int64
}

func startRSSSampler(every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{}), out: make(chan int64, 1)}
	go func() {
		peak := procStatusKB("VmRSS")
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				s.out <- max(peak, procStatusKB("VmRSS"))
				return
			case <-t.C:
				peak = max(peak, procStatusKB("VmRSS"))
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() int64 {
	close(s.done)
	return <-s.out
}

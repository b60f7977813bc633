package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/localstack/system"
)

// buildFlags are `make build`'s.
var buildFlags = []string{"build", "-trimpath", "-tags", "lambda.norpc", "-ldflags=-s -w"}

// artifacts builds every functions/* like `make build` (linux/<goarch>),
// zips each bootstrap as Lambda would take it, and times the cold start of
// one function built for this machine.
func (r *runner) artifacts() error {
	dir, err := os.MkdirTemp("", "outbox-bench-dist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fns, err := functionNames()
	if err != nil {
		return err
	}
	t0 := time.Now()
	out := filepath.Join(dir, r.f.goarch) + string(os.PathSeparator)
	if err := goBuild("linux", r.f.goarch, out, "./functions/..."); err != nil {
		return err
	}
	buildSecs := time.Since(t0).Seconds()
	sizes := map[string]any{}
	maxZip, maxName := int64(0), ""
	for _, fn := range fns {
		bin := filepath.Join(out, fn)
		zipPath := filepath.Join(dir, fn+".zip")
		if err := zipBootstrap(bin, zipPath); err != nil {
			return err
		}
		zi, err := os.Stat(zipPath)
		if err != nil {
			return err
		}
		bi, _ := os.Stat(bin)
		sizes[fn] = map[string]int64{"zip_bytes": zi.Size(), "bootstrap_bytes": bi.Size()}
		if zi.Size() > maxZip {
			maxZip, maxName = zi.Size(), fn
		}
	}
	r.set("lambda_zip_bytes_max", maxZip)
	r.set("lambda_zip_max_function", maxName)
	r.set("lambda_artifacts", sizes)
	r.set("lambda_build_seconds", round(buildSecs, 1))
	r.set("lambda_goarch", r.f.goarch)

	// Cold-start proxy: the authorizer built for this machine, run as a
	// process against an emulated Lambda Runtime API; its first invocation
	// does a real token lookup in DynamoDB Local.
	// A small table with the bot token for the function's first invocation.
	st, _, stop, err := r.startStack(system.Options{DisableStream: true, DisableQueue: true})
	if err != nil {
		return err
	}
	defer stop()
	table := st.App.Store.Table()
	host := filepath.Join(dir, "host") + string(os.PathSeparator)
	if err := goBuild(runtime.GOOS, runtime.GOARCH, host, "./functions/authorizer"); err != nil {
		return err
	}
	bin := filepath.Join(host, "authorizer")
	var inits, firsts []time.Duration
	for i := 0; i < r.f.initRuns; i++ {
		initDone, firstResp, err := r.coldStart(bin, table)
		if err != nil {
			return fmt.Errorf("cold start %d: %w", i+1, err)
		}
		inits, firsts = append(inits, initDone), append(firsts, firstResp)
	}
	r.set("handler_init_ms", pct(firsts, 50))
	r.set("handler_init_first_run_ms", float64(firsts[0].Microseconds())/1000)
	r.set("handler_init_to_next_ms", pct(inits, 50))
	r.set("handler_init_function", "authorizer")
	r.set("handler_init_runs", len(firsts))
	return nil
}

func functionNames() ([]string, error) {
	ents, err := os.ReadDir("functions")
	if err != nil {
		return nil, fmt.Errorf("run from the repository root: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join("functions", e.Name(), "main.go")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func goBuild(goos, goarch, out string, pkgs ...string) error {
	args := append(slices.Clone(buildFlags), "-o", out)
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s (GOOS=%s GOARCH=%s): %w", strings.Join(args, " "), goos, goarch, err)
	}
	return nil
}

// zipBootstrap writes a Lambda deployment zip holding bin as "bootstrap".
func zipBootstrap(bin, zipPath string) error {
	src, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(zipPath)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(dst)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = io.Copy(w, src)
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// coldStart runs bin as a Lambda function process against a one-shot Runtime
// API and returns the time from process start to its first GET .../next (init
// done) and to its first POST .../response (first handler return).
func (r *runner) coldStart(bin, table string) (time.Duration, time.Duration, error) {
	event, _ := json.Marshal(events.APIGatewayV2CustomAuthorizerV2Request{
		Version: "2.0", Type: "REQUEST", RouteKey: "POST /v1/intents", RawPath: "/v1/intents",
		IdentitySource: []string{"Bearer " + benchToken},
		Headers:        map[string]string{"authorization": "Bearer " + benchToken},
	})
	var (
		mu       sync.Mutex
		served   bool
		nextAt   time.Time
		respAt   time.Time
		respBody []byte
		done     = make(chan struct{})
		once     sync.Once
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		if nextAt.IsZero() {
			nextAt = time.Now()
		}
		first := !served
		served = true
		mu.Unlock()
		if !first {
			<-req.Context().Done() // the process is killed while waiting
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "bench-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", fmt.Sprint(time.Now().Add(30*time.Second).UnixMilli()))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:authorizer")
		w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(event)
	})
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		respAt, respBody = time.Now(), b
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		once.Do(func() { close(done) })
	})
	fail := func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		respBody = append([]byte("error: "), b...)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		once.Do(func() { close(done) })
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", fail)
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", fail)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		srv.Close()
	}()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"AWS_LAMBDA_RUNTIME_API="+ln.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME=authorizer", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256", "_HANDLER=bootstrap", "LAMBDA_TASK_ROOT="+filepath.Dir(bin),
		"OUTBOX_TABLE="+table,
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
	gone := false
	select {
	case <-done:
	case err := <-exited:
		gone = true
		werr = fmt.Errorf("function exited before answering: %v", err)
	case <-time.After(20 * time.Second):
		werr = fmt.Errorf("no response after 20s")
	}
	if !gone {
		_ = cmd.Process.Kill() // our child, by its own PID
		<-exited
	}
	if werr != nil {
		return 0, 0, fmt.Errorf("%w; stderr: %s", werr, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
	if err := json.Unmarshal(respBody, &resp); err != nil || !resp.IsAuthorized {
		return 0, 0, fmt.Errorf("unexpected authorizer answer %q (%v); stderr: %s", respBody, err, stderr.String())
	}
	return nextAt.Sub(start), respAt.Sub(start), nil
}

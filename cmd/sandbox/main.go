// Command sandbox serves the sandbox provider (see sandbox/README.md) on a
// loopback address until SIGINT or SIGTERM.
//
//	sandbox [-addr 127.0.0.1:4100]   (or OUTBOX_SANDBOX_ADDR)
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/botharness/outbox/sandbox"
)

const defaultAddr = "127.0.0.1:4100"

func main() {
	if err := run(); err != nil {
		slog.Error("sandbox failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("OUTBOX_SANDBOX_ADDR")
	if addr == "" {
		addr = defaultAddr
	}
	flag.StringVar(&addr, "addr", addr, "listen address (env OUTBOX_SANDBOX_ADDR)")
	flag.Parse()

	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	slog.SetDefault(logger)

	sb := sandbox.New(time.Now, sandbox.WithLogger(logger))
	ln, err := sandbox.Listen(addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sb, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("sandbox listening", slog.String("addr", ln.Addr().String()))

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("sandbox shutting down")
	sb.Close() // let held requests go, or Shutdown would wait for them
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("sandbox stopped")
	return nil
}

// Command outbox-mcp is the outbox's MCP server over stdio, for agents on a
// laptop: an MCP client (Claude Desktop, an IDE, an agent framework) starts
// it and talks JSON-RPC on its stdin/stdout. Its tools call the outbox API
// at OUTBOX_API_URL (or http://$OUTBOX_HTTP_ADDR, default
// http://127.0.0.1:4000) with OUTBOX_TOKEN; the token's principal (bot,
// orchestrator, operator) decides which tools are offered.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/botharness/outbox/adapters/mcpserver"
	"github.com/botharness/outbox/client"
)

// apiURL: OUTBOX_API_URL, else the local host's OUTBOX_HTTP_ADDR.
// (A shared helper for this is coming to client/; this one is local.)
func apiURL() string {
	if u := strings.TrimSpace(os.Getenv("OUTBOX_API_URL")); u != "" {
		return strings.TrimRight(u, "/")
	}
	addr := strings.TrimSpace(os.Getenv("OUTBOX_HTTP_ADDR"))
	if addr == "" {
		addr = "127.0.0.1:4000"
	}
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	return "http://" + addr
}

func main() {
	// stdout is the protocol: logs go to stderr only.
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(log); err != nil {
		fmt.Fprintln(os.Stderr, "outbox-mcp:", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	token := os.Getenv("OUTBOX_TOKEN")
	if token == "" {
		return fmt.Errorf("OUTBOX_TOKEN is required (a bot or orchestrator token of the outbox API)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := client.New(apiURL(), token)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	p, err := mcpserver.DiscoverPrincipal(dctx, c)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", apiURL(), err)
	}
	s := mcpserver.NewServer(c, p, mcpserver.Options{Log: log})
	return s.Run(ctx, &mcp.StdioTransport{})
}

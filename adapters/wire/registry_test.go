package wire

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/botharness/outbox/core"
)

// TestNoPerProviderBranchInWire enforces "a provider is one package,
// registered in one list": in adapters/wire's code (tests aside) a provider
// package is named only inside the Registered list, no provider's name
// appears as a string literal, and nothing type-asserts or type-switches on
// a provider package's type. Adding a provider must never need a branch here.
func TestNoPerProviderBranchInWire(t *testing.T) {
	const providersPath = "github.com/botharness/outbox/adapters/providers/"
	names := map[string]bool{}
	for _, r := range Registered {
		names[r.Name] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		providerPkgs := map[string]bool{} // local import names of provider packages
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, providersPath)
			if !ok || rest == "plugin" || rest == "httpx" {
				continue
			}
			name := filepath.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			providerPkgs[name] = true
		}
		// The Registered list is the one place allowed to name them.
		var list ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && vs.Names[0].Name == "Registered" {
				list = vs
				return false
			}
			return true
		})
		inList := func(n ast.Node) bool { return list != nil && n.Pos() >= list.Pos() && n.End() <= list.End() }
		isProviderType := func(e ast.Expr) bool {
			found := false
			ast.Inspect(e, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && providerPkgs[id.Name] {
						found = true
					}
				}
				return !found
			})
			return found
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && providerPkgs[id.Name] && !inList(x) {
					t.Errorf("%s: %s.%s outside the Registered list: a per-provider branch (use the provider's registration)", fset.Position(x.Pos()), id.Name, x.Sel.Name)
				}
			case *ast.TypeAssertExpr:
				if x.Type != nil && isProviderType(x.Type) {
					t.Errorf("%s: type assertion on a provider's concrete type", fset.Position(x.Pos()))
				}
			case *ast.BasicLit:
				if x.Kind == token.STRING {
					if v, err := strconv.Unquote(x.Value); err == nil && names[v] {
						t.Errorf("%s: the provider name %q as a literal: a per-provider branch", fset.Position(x.Pos()), v)
					}
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}

// A function that does not send (the webhook function) builds every
// registered provider from Secrets Manager references without reading them:
// each withheld secret's stand-in passes its adapter's validation (a
// service-account key file's shape for gcal), and the providers refuse to send.
func TestEveryProviderBuildsWithSendingSecretsWithheld(t *testing.T) {
	cfg := `{"sandbox":{"baseUrl":"http://127.0.0.1:1","tokens":{"a":"secretsmanager:s/a"}},
	  "http":{"accounts":{"h":{"url":"https://r.example","secret":"secretsmanager:s/h"}}},
	  "slack":{"accounts":{"T1":{"token":"secretsmanager:s/slack"}}},
	  "telegram":{"accounts":{"b":{"token":"secretsmanager:s/tg"}}},
	  "stripe":{"accounts":{"shop":{"secretKey":"secretsmanager:s/stripe"}}},
	  "discord":{"accounts":{"d":{"token":"secretsmanager:s/discord"}}},
	  "gcal":{"accounts":{"cal":{"serviceAccount":"secretsmanager:s/gcal"}}},
	  "twilio":{"statusCallbackBaseUrl":"https://o.example","accounts":{"tw":{"accountSid":"AC0123456789abcdef0123456789abcdef","authToken":"env:OUTBOX_TEST_TWILIO_TOKEN","apiKeySid":"SK0123456789abcdef0123456789abcdef","apiKeySecret":"secretsmanager:s/twkey","from":"+15005550006"}}},
	  "postmark":{"accounts":{"pm":{"serverToken":"secretsmanager:s/pm","from":"orders@example.com"}}},
	  "whatsapp":{"accounts":{"wa":{"phoneNumberId":"106540352242922","accessToken":"secretsmanager:s/wa","appSecret":"env:OUTBOX_TEST_TWILIO_TOKEN","verifyToken":"env:OUTBOX_TEST_TWILIO_TOKEN"}}},
	  "ses":{"region":"us-east-1","accounts":{"mail":{"from":"orders@example.com"}}}}`
	// Twilio's auth token also verifies callbacks, so this function reads it.
	t.Setenv("OUTBOX_TEST_TWILIO_TOKEN", "tw-token")
	m, err := ProvidersWith(context.Background(), cfg, nil, &SecretResolver{Uses: map[SecretUse]bool{SecretForVerifying: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Registered {
		p, ok := m[r.Name]
		if !ok {
			t.Errorf("%s not built", r.Name)
			continue
		}
		if _, err := p.Send(context.Background(), core.SendRequest{Account: "x"}); !errors.Is(err, ErrCredentialsWithheld) {
			t.Errorf("%s sends without credentials: %v", r.Name, err)
		}
	}
}

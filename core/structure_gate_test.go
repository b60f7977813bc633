package core

// Structural rules of issue 47, checked over the source (go/ast): the
// account gate is a component the dispatcher asks, inline delivery goes
// through the dispatcher's one public entry, and the lease-ownership check
// is written once.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// parseDir parses the non-test Go files of dir (recursively when deep).
func parseDir(t *testing.T, dir string, deep bool) map[string]*ast.File {
	t.Helper()
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && path != dir && !deep {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files[path] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files under %s", dir)
	}
	return files
}

// recvType is the name of a method's receiver type ("" for a function).
func recvType(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	x := fd.Recv.List[0].Type
	if s, ok := x.(*ast.StarExpr); ok {
		x = s.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// The gate is its own package: no method of Dispatcher lives there, and its
// runtime knows nothing of the dispatcher, intents, inline delivery or
// triggers (it imports no package of this module; only the operators'
// pacing service, core/gate/pacing, speaks core's principals and errors).
func TestGateIsAComponentTheDispatcherAsks(t *testing.T) {
	for path, f := range parseDir(t, "gate", true) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && recvType(fd) == "Dispatcher" {
				t.Errorf("%s: method Dispatcher.%s lives in the gate package", path, fd.Name.Name)
			}
		}
		if filepath.Dir(path) != "gate" {
			continue
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/botharness/outbox/") {
				t.Errorf("%s imports %s: the gate must not know the dispatcher's world", path, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && (strings.Contains(id.Name, "Trigger") || strings.Contains(strings.ToLower(id.Name), "inline")) {
				t.Errorf("%s: %s: the gate knows nothing of triggers or inline delivery", path, id.Name)
			}
			return true
		})
	}
	// The dispatcher's files hold no pace arithmetic of their own.
	for path, f := range parseDir(t, ".", false) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Take" || sel.Sel.Name == "TakeProbe") {
				if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Store" {
					t.Errorf("%s: calls the gate's store (%s) instead of asking the gate", path, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// Inline delivery reaches the dispatcher only through its exported entry:
// no call in inline.go to an unexported method of another type (a call on
// the enclosing method's own receiver is its own business).
func TestInlineCallsNoUnexportedMethodOfAnotherType(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "inline.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		recv := ""
		if fd.Recv != nil && len(fd.Recv.List) > 0 && len(fd.Recv.List[0].Names) > 0 {
			recv = fd.Recv.List[0].Names[0].Name
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || ast.IsExported(sel.Sel.Name) {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv && recv != "" {
				return true
			}
			t.Errorf("inline.go:%d: %s calls unexported %s on another value", fset.Position(call.Pos()).Line, fd.Name.Name, sel.Sel.Name)
			return true
		})
	}
}

// The lease-ownership check is written once: Intent.HeldBy is the only
// place that compares a lease's owner, and the guard "not held: the lease
// is lost" exists once (Dispatcher.updateHeld).
func TestLeaseOwnershipCheckExistsOnce(t *testing.T) {
	guards := 0
	for path, f := range parseDir(t, ".", false) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name == "HeldBy" {
					return filepath.Base(path) != "intent.go" // HeldBy itself
				}
			case *ast.BinaryExpr:
				for _, side := range []ast.Expr{n.X, n.Y} {
					if sel, ok := side.(*ast.SelectorExpr); ok && sel.Sel.Name == "Owner" {
						if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Lease" && (n.Op == token.EQL || n.Op == token.NEQ) {
							t.Errorf("%s:%v: compares a lease's owner outside Intent.HeldBy", path, n.Pos())
						}
					}
				}
			case *ast.IfStmt:
				if u, ok := n.Cond.(*ast.UnaryExpr); ok && u.Op == token.NOT {
					if c, ok := u.X.(*ast.CallExpr); ok {
						if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "HeldBy" && returnsLeaseLost(n.Body) {
							guards++
						}
					}
				}
			}
			return true
		})
	}
	if guards != 1 {
		t.Fatalf("the guard \"not held: ErrLeaseLost\" is written %d times, want once (Dispatcher.updateHeld)", guards)
	}
}

func returnsLeaseLost(b *ast.BlockStmt) bool {
	found := false
	ast.Inspect(b, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == "ErrLeaseLost" {
			found = true
		}
		return true
	})
	return found
}

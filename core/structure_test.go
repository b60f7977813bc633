package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxCoreExports bounds what core's top-level package exports (issue 47):
// the intent model, its rules and the ports stay here; services built on
// them live in subpackages (docs/core-packages.md).
const maxCoreExports = 300

// TestCoreTopLevelExports counts the exported identifiers of package core
// (non-test files): types, functions, methods (also those of unexported
// types), constants and variables. It fails above maxCoreExports and names
// the files that export the most.
func TestCoreTopLevelExports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	perFile := map[string]int{}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if af.Name.Name != "core" {
			t.Fatalf("%s: package %s in core's directory", f, af.Name.Name)
		}
		n := exportedDecls(af)
		perFile[f] = n
		total += n
	}
	if total == 0 {
		t.Fatal("no exported identifiers found: the count reads the wrong directory")
	}
	t.Logf("core exports %d identifiers (limit %d)", total, maxCoreExports)
	if total > maxCoreExports {
		names := make([]string, 0, len(perFile))
		for f := range perFile {
			names = append(names, f)
		}
		sort.Slice(names, func(i, j int) bool { return perFile[names[i]] > perFile[names[j]] })
		var top []string
		for _, f := range names[:min(8, len(names))] {
			top = append(top, f+"="+strconv.Itoa(perFile[f]))
		}
		t.Fatalf("core exports %d identifiers, more than %d; move a service that only consumes the model into a subpackage (largest: %s)",
			total, maxCoreExports, strings.Join(top, " "))
	}
}

// exportedDecls counts the exported top-level identifiers of one file.
func exportedDecls(af *ast.File) int {
	n := 0
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() {
				n++
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						n++
					}
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if id.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

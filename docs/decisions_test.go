// Package docs holds no code: its test keeps docs/decisions.md true to the
// code it describes.
package docs

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestDecisionsConstantsMatchTheCode reads every row of the constant tables
// in decisions.md (a table whose header starts `| constant | value |`) and
// checks it against the module's non-test Go code, found by name wherever it
// lives:
//
//   - `Name`: a package-level const or var, or a func whose body returns
//     one expression (its value);
//   - `Name.Field`: the keyed element Field of the composite literal that
//     the var Name holds or the func Name returns; or, when Name is a type,
//     the default E a method of Name gives the field (`OrDefault(x.Field,
//     E)`, `cmp.Or(x.Field, E)`, `if x.Field <= 0 { x.Field = E }`, also
//     through a local `v := x.Field`), else the element Field of composite
//     literals `Name{…}` outside tests;
//   - `pkg.Name`: Name declared in a package whose directory is named pkg
//     (for names declared in several packages), else anywhere;
//   - `OUTBOX_X`: the default E in a call `…Env("OUTBOX_X", E)`.
//
// Every declaration found must give the same value.
//
// The value is evaluated (integers, floats, strings, time units, + - * /
// << and conversions, other constants by name) and compared with the row's
// value: `100 ms`, `1.5 s`, `15 min`, `24 h`, `7 days` for durations,
// `256 KiB`/`1 MiB` for byte counts, plain numbers otherwise. Every test
// named in the row's third column (`TestX`, `FuzzX`, `BenchmarkX`, with
// an optional `dir/` prefix) must exist as a function of a _test.go file of
// the module; a row without one says `none` and what was tried.
func TestDecisionsConstantsMatchTheCode(t *testing.T) {
	doc, err := os.ReadFile("decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	m := loadModule(t, "..")
	rows := constantRows(string(doc))
	if len(rows) < 40 {
		t.Fatalf("decisions.md has %d constant rows; expected its tables (| constant | value | ...) to name at least 40", len(rows))
	}
	names := map[string]int{}
	for _, r := range rows {
		names[r.name]++
		if names[r.name] == 2 {
			t.Errorf("line %d: `%s` has more than one row", r.line, r.name)
		}
		want, err := parseDocValue(r.value)
		if err != nil {
			t.Errorf("line %d: `%s`: value %q: %v", r.line, r.name, r.value, err)
			continue
		}
		got, where, err := m.lookup(r.name)
		if err != nil {
			t.Errorf("line %d: `%s`: %v", r.line, r.name, err)
			continue
		}
		if !equalValue(got, want) {
			t.Errorf("line %d: `%s` is %s in decisions.md but %s in the code (%s)", r.line, r.name, r.value, describe(got, want), where)
		}
		tests := testRef.FindAllStringSubmatch(r.tests, -1)
		if len(tests) == 0 && !strings.HasPrefix(strings.TrimSpace(r.tests), "none") {
			t.Errorf("line %d: `%s` names no test that fails without it (write `TestX`, or none and why)", r.line, r.name)
		}
	}
	t.Logf("checked %d constants against the code", len(rows))
}

// TestDecisionsNameOnlyTestsThatExist: every test function decisions.md
// names in backticks exists in some _test.go file of the module.
func TestDecisionsNameOnlyTestsThatExist(t *testing.T) {
	doc, err := os.ReadFile("decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	m := loadModule(t, "..")
	seen := map[string]bool{}
	for _, span := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(doc), -1) {
		for _, ref := range testRef.FindAllStringSubmatch(span[1], -1) {
			name := ref[1]
			if seen[name] {
				continue
			}
			seen[name] = true
			if !m.tests[name] {
				t.Errorf("decisions.md names %s, which is no test function of the module", name)
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("decisions.md names no test")
	}
	t.Logf("%d tests named, all exist", len(seen))
}

// testRef matches a test function's name, alone or after a directory or
// package prefix (`e2e/TestX`, `core.TestX`).
var testRef = regexp.MustCompile("(?:^|[\\s/.(,`])((?:Test|Fuzz|Benchmark)[A-Z0-9_][A-Za-z0-9_]*)\\b")

type row struct {
	line               int
	name, value, tests string
}

// constantRows returns the rows of every table whose header is
// `| constant | value | ... |`.
func constantRows(doc string) []row {
	var rows []row
	in := false
	for i, line := range strings.Split(doc, "\n") {
		cells := tableCells(line)
		if cells == nil {
			in = false
			continue
		}
		if len(cells) >= 2 && strings.EqualFold(cells[0], "constant") && strings.EqualFold(cells[1], "value") {
			in = true
			continue
		}
		if !in || strings.Trim(cells[0], "-: ") == "" {
			continue
		}
		r := row{line: i + 1, name: strings.Trim(cells[0], "` "), value: strings.Trim(cells[1], "` ")}
		if len(cells) > 2 {
			r.tests = cells[2]
		}
		rows = append(rows, r)
	}
	return rows
}

func tableCells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
		return nil
	}
	parts := strings.Split(line[1:len(line)-1], "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// docValue is a row's value: a number with its unit resolved (durations in
// nanoseconds, bytes), a string, or a bool.
type docValue struct {
	v        constant.Value
	duration bool
}

var units = map[string]struct {
	scale    int64
	duration bool
}{
	"ns": {1, true}, "µs": {1e3, true}, "us": {1e3, true}, "ms": {1e6, true}, "s": {1e9, true},
	"min": {60e9, true}, "h": {3600e9, true}, "day": {86400e9, true}, "days": {86400e9, true},
	"B": {1, false}, "bytes": {1, false}, "KiB": {1 << 10, false}, "MiB": {1 << 20, false},
}

func parseDocValue(s string) (docValue, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "true" || s == "false":
		return docValue{v: constant.MakeBool(s == "true")}, nil
	case strings.HasPrefix(s, `"`):
		return docValue{v: constant.MakeString(strings.Trim(s, `"`))}, nil
	}
	num, unit, _ := strings.Cut(s, " ")
	num = strings.ReplaceAll(num, ",", "")
	v := constant.MakeFromLiteral(num, token.INT, 0)
	if v.Kind() == constant.Unknown {
		v = constant.MakeFromLiteral(num, token.FLOAT, 0)
	}
	if v.Kind() == constant.Unknown {
		return docValue{}, fmt.Errorf("not a number, \"string\", true or false")
	}
	if unit == "" {
		return docValue{v: v}, nil
	}
	u, ok := units[unit]
	if !ok {
		return docValue{}, fmt.Errorf("unknown unit %q", unit)
	}
	return docValue{v: constant.BinaryOp(v, token.MUL, constant.MakeInt64(u.scale)), duration: u.duration}, nil
}

func equalValue(got constant.Value, want docValue) bool {
	if got.Kind() != want.v.Kind() && !(isNumeric(got) && isNumeric(want.v)) {
		return false
	}
	return constant.Compare(got, token.EQL, want.v)
}

func isNumeric(v constant.Value) bool {
	return v.Kind() == constant.Int || v.Kind() == constant.Float
}

func describe(got constant.Value, want docValue) string {
	if want.duration && isNumeric(got) {
		if ns, ok := constant.Int64Val(constant.ToInt(got)); ok {
			return fmt.Sprintf("%v", durationString(ns))
		}
	}
	return got.ExactString()
}

func durationString(ns int64) string {
	for _, u := range []struct {
		name  string
		scale int64
	}{{"days", 86400e9}, {"h", 3600e9}, {"min", 60e9}, {"s", 1e9}, {"ms", 1e6}, {"µs", 1e3}} {
		if ns >= u.scale {
			f, _ := new(big.Rat).SetFrac64(ns, u.scale).Float64()
			return fmt.Sprintf("%g %s", f, u.name)
		}
	}
	return fmt.Sprintf("%d ns", ns)
}

// module is every non-test declaration of the module, by name, and every
// test function's name.
type module struct {
	fset  *token.FileSet
	decls map[string][]decl // name -> declarations
	// typeDefaults: "Type.Field" -> the defaults a method of Type gives
	// the field; literalFields: the values `Type{Field: v}` literals give it.
	typeDefaults, literalFields map[string][]decl
	envDefaults                 map[string][]decl // OUTBOX_X -> default expressions
	tests                       map[string]bool
	evaluating                  map[string]bool
}

type decl struct {
	dir  string // package directory, relative to the module root
	expr ast.Expr
	pos  token.Pos
}

var (
	loadOnce sync.Once
	loaded   *module
	loadErr  error
)

// loadModule parses the module once for both tests.
func loadModule(t *testing.T, root string) *module {
	t.Helper()
	loadOnce.Do(func() { loaded, loadErr = parseModule(root) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

func parseModule(root string) (*module, error) {
	m := &module{fset: token.NewFileSet(), decls: map[string][]decl{}, typeDefaults: map[string][]decl{}, literalFields: map[string][]decl{},
		envDefaults: map[string][]decl{}, tests: map[string]bool{}, evaluating: map[string]bool{}}
	testFunc := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)
	var typeLits []*ast.File
	var typeLitDirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "cdk.out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		if strings.HasSuffix(name, "_test.go") {
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m2 := range testFunc.FindAllSubmatch(src, -1) {
				m.tests[string(m2[1])] = true
			}
			return nil
		}
		f, err := parser.ParseFile(m.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		m.collect(dir, f)
		typeLits = append(typeLits, f)
		typeLitDirs = append(typeLitDirs, dir)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, f := range typeLits {
		m.collectDefaults(typeLitDirs[i], f)
	}
	return m, nil
}

func (m *module) collect(dir string, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok != token.CONST && d.Tok != token.VAR {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						m.decls[n.Name] = append(m.decls[n.Name], decl{dir: dir, expr: vs.Values[i], pos: n.Pos()})
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv != nil || d.Body == nil || len(d.Body.List) != 1 {
				continue
			}
			if ret, ok := d.Body.List[0].(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
				m.decls[d.Name.Name] = append(m.decls[d.Name.Name], decl{dir: dir, expr: ret.Results[0], pos: d.Name.Pos()})
			}
		}
	}
}

// collectDefaults finds the defaults a name of the form Type.Field or
// OUTBOX_X can mean (see TestDecisionsConstantsMatchTheCode).
func (m *module) collectDefaults(dir string, f *ast.File) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		recv := ""
		if ok && fd.Recv != nil && len(fd.Recv.List) == 1 {
			recv = typeName(fd.Recv.List[0].Type)
		}
		fromField := map[string]string{} // local name -> field it was read from (x := recv.F)
		ast.Inspect(d, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE && len(n.Lhs) == 1 && len(n.Rhs) == 1 {
					if id, ok := n.Lhs[0].(*ast.Ident); ok {
						if sel, ok := n.Rhs[0].(*ast.SelectorExpr); ok {
							fromField[id.Name] = sel.Sel.Name
						}
					}
				}
			case *ast.IfStmt:
				// if recv.F <= 0 { recv.F = E }, or x := recv.F; if x <= 0 { x = E }
				cond, ok := n.Cond.(*ast.BinaryExpr)
				if !ok || recv == "" || (cond.Op != token.LEQ && cond.Op != token.EQL) || len(n.Body.List) != 1 || n.Else != nil {
					return true
				}
				as, ok := n.Body.List[0].(*ast.AssignStmt)
				if !ok || as.Tok != token.ASSIGN || len(as.Lhs) != 1 || len(as.Rhs) != 1 || types.ExprString(as.Lhs[0]) != types.ExprString(cond.X) {
					return true
				}
				field := ""
				switch x := cond.X.(type) {
				case *ast.SelectorExpr:
					field = x.Sel.Name
				case *ast.Ident:
					field = fromField[x.Name]
				}
				if field != "" {
					k := recv + "." + field
					m.typeDefaults[k] = append(m.typeDefaults[k], decl{dir: dir, expr: as.Rhs[0], pos: n.Pos()})
				}
			case *ast.CallExpr:
				if len(n.Args) != 2 {
					return true
				}
				callee := typeName(n.Fun)
				if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasSuffix(callee, "Env") {
					name := strings.Trim(lit.Value, "\"`")
					m.envDefaults[name] = append(m.envDefaults[name], decl{dir: dir, expr: n.Args[1], pos: n.Pos()})
				}
				if sel, ok := n.Args[0].(*ast.SelectorExpr); ok && recv != "" && (callee == "OrDefault" || callee == "orDefault" || callee == "Or") {
					k := recv + "." + sel.Sel.Name
					m.typeDefaults[k] = append(m.typeDefaults[k], decl{dir: dir, expr: n.Args[1], pos: n.Pos()})
				}
			case *ast.CompositeLit:
				tn := typeName(n.Type)
				if tn == "" {
					return true
				}
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if key, ok := kv.Key.(*ast.Ident); ok {
							k := tn + "." + key.Name
							m.literalFields[k] = append(m.literalFields[k], decl{dir: dir, expr: kv.Value, pos: kv.Pos()})
						}
					}
				}
			}
			return true
		})
	}
}

// typeName is the last name of a type or function expression: T, *T,
// pkg.T, T[...] -> "T".
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.UnaryExpr:
		return typeName(e.X)
	}
	return ""
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*_[A-Z0-9_]+$`)

// lookup evaluates what a row names; every declaration found must agree.
func (m *module) lookup(name string) (constant.Value, string, error) {
	var cands []decl
	switch base, field, dotted := strings.Cut(name, "."); {
	case envName.MatchString(name):
		cands = m.envDefaults[name]
	case !dotted:
		cands = m.decls[name]
	default:
		for _, d := range m.decls[base] {
			if e := fieldOf(d.expr, field); e != nil {
				cands = append(cands, decl{dir: d.dir, expr: e, pos: e.Pos()})
			}
		}
		if len(cands) == 0 {
			cands = m.typeDefaults[name]
		}
		if len(cands) == 0 {
			cands = m.literalFields[name]
		}
		if len(cands) == 0 {
			// pkg.Name: Name declared in a package of that name, else anywhere.
			for _, d := range m.decls[field] {
				if filepath.Base(d.dir) == base {
					cands = append(cands, d)
				}
			}
			if len(cands) == 0 {
				cands = m.decls[field]
			}
		}
	}
	if len(cands) == 0 {
		return nil, "", fmt.Errorf("no declaration of that name in the module's non-test code")
	}
	var first constant.Value
	var where []string
	for _, c := range cands {
		v, err := m.eval(c.dir, c.expr)
		p := m.fset.Position(c.pos)
		at := fmt.Sprintf("%s:%d", p.Filename, p.Line)
		if err != nil {
			return nil, at, fmt.Errorf("%s: cannot evaluate: %v", at, err)
		}
		if first != nil && !constant.Compare(first, token.EQL, v) {
			return nil, at, fmt.Errorf("declared with different values: %s and %s (%s)", first.ExactString(), v.ExactString(), strings.Join(append(where, at), ", "))
		}
		first = v
		where = append(where, at)
	}
	sort.Strings(where)
	return first, strings.Join(where, ", "), nil
}

// fieldOf is the keyed element field of the composite literal e (or &e).
func fieldOf(e ast.Expr, field string) ast.Expr {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == field {
				return kv.Value
			}
		}
	}
	return nil
}

var timeUnits = map[string]int64{"Nanosecond": 1, "Microsecond": 1e3, "Millisecond": 1e6, "Second": 1e9, "Minute": 60e9, "Hour": 3600e9}

func (m *module) eval(dir string, e ast.Expr) (constant.Value, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(e.Value, e.Kind, 0)
		if v.Kind() == constant.Unknown {
			return nil, fmt.Errorf("literal %s", e.Value)
		}
		return v, nil
	case *ast.ParenExpr:
		return m.eval(dir, e.X)
	case *ast.UnaryExpr:
		x, err := m.eval(dir, e.X)
		if err != nil {
			return nil, err
		}
		return constant.UnaryOp(e.Op, x, 0), nil
	case *ast.BinaryExpr:
		x, err := m.eval(dir, e.X)
		if err != nil {
			return nil, err
		}
		y, err := m.eval(dir, e.Y)
		if err != nil {
			return nil, err
		}
		switch e.Op {
		case token.SHL, token.SHR:
			s, ok := constant.Uint64Val(y)
			if !ok {
				return nil, fmt.Errorf("shift by %s", y)
			}
			return constant.Shift(x, e.Op, uint(s)), nil
		case token.QUO:
			if x.Kind() == constant.Int && y.Kind() == constant.Int {
				return constant.BinaryOp(x, token.QUO_ASSIGN, y), nil // integer division
			}
		}
		return constant.BinaryOp(x, e.Op, y), nil
	case *ast.CallExpr:
		// A conversion: time.Duration(x), float64(x), int64(x).
		if len(e.Args) == 1 {
			switch typeName(e.Fun) {
			case "Duration", "int", "int64", "int32", "uint", "uint64", "float64", "float32":
				v, err := m.eval(dir, e.Args[0])
				if err != nil {
					return nil, err
				}
				if strings.HasPrefix(typeName(e.Fun), "float") {
					return constant.ToFloat(v), nil
				}
				return constant.ToInt(v), nil
			}
		}
		return nil, fmt.Errorf("call %s", typeName(e.Fun))
	case *ast.Ident:
		switch e.Name {
		case "true", "false":
			return constant.MakeBool(e.Name == "true"), nil
		}
		return m.named(dir, "", e.Name)
	case *ast.SelectorExpr:
		if pkg, ok := e.X.(*ast.Ident); ok {
			if pkg.Name == "time" {
				if u, ok := timeUnits[e.Sel.Name]; ok {
					return constant.MakeInt64(u), nil
				}
			}
			return m.named(dir, pkg.Name, e.Sel.Name)
		}
	}
	return nil, fmt.Errorf("expression %T", e)
}

// named evaluates an identifier used inside an expression: declared in the
// same package first, then in a package of that name, then anywhere once.
func (m *module) named(dir, pkg, name string) (constant.Value, error) {
	cands := m.decls[name]
	pick := func(keep func(decl) bool) []decl {
		var out []decl
		for _, c := range cands {
			if keep(c) {
				out = append(out, c)
			}
		}
		return out
	}
	var found []decl
	if pkg == "" {
		found = pick(func(c decl) bool { return c.dir == dir })
	} else {
		found = pick(func(c decl) bool { return filepath.Base(c.dir) == pkg })
	}
	if len(found) == 0 {
		found = cands
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: %d declarations", name, len(found))
	}
	key := found[0].dir + "." + name
	if m.evaluating[key] {
		return nil, fmt.Errorf("%s refers to itself", name)
	}
	m.evaluating[key] = true
	defer delete(m.evaluating, key)
	return m.eval(found[0].dir, found[0].expr)
}

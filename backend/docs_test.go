package backend_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/DESIGN.md cannot drift from the code: every package of backend/ is
// in its package map, and every `pkg.Ident` it names (a package's exported
// function, type, variable or constant, or a type's method or field as
// `pkg.Type.Member`) exists.
func TestDesignNamesWhatExists(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	design := string(b)
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/switchyard/switchyard/"
	pkgs := map[string]*pkgNames{} // by the package's last path element
	for _, path := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(path, module)
		if rel == "backend" {
			continue
		}
		if !strings.Contains(design, "`"+rel+"`") {
			t.Errorf("docs/DESIGN.md's package map lacks `%s`", rel)
		}
		pkgs[filepath.Base(rel)] = names(t, filepath.Join("..", rel))
	}
	for _, m := range regexp.MustCompile("`([a-z]+)\\.([A-Z][A-Za-z0-9]*)(?:\\.([A-Za-z][A-Za-z0-9]*))?").FindAllStringSubmatch(design, -1) {
		p, ok := pkgs[m[1]]
		if !ok {
			continue // a variable or an unexported type (run.settle), not a package
		}
		ident, member := m[2], m[3]
		switch {
		case !p.idents[ident]:
			t.Errorf("docs/DESIGN.md names %s.%s, which backend/…/%s does not declare", m[1], ident, m[1])
		case member != "" && !p.members[ident+"."+member]:
			t.Errorf("docs/DESIGN.md names %s.%s.%s, which %s.%s does not have", m[1], ident, member, m[1], ident)
		}
	}
}

// pkgNames are what a package declares at its top level, and its types'
// methods and fields ("Type.Member").
type pkgNames struct {
	idents, members map[string]bool
}

func names(t *testing.T, dir string) *pkgNames {
	t.Helper()
	p := &pkgNames{idents: map[string]bool{}, members: map[string]bool{}}
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.idents[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					p.members[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.idents[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, f := range st.Fields.List {
								for _, n := range f.Names {
									p.members[s.Name.Name+"."+n.Name] = true
								}
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									p.members[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.idents[n.Name] = true
						}
					}
				}
			}
		}
	}
	return p
}

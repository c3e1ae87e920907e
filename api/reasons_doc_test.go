package api

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

// TestEveryReasonCodeIsDocumented: every ReasonCode constant of vocabulary.go appears, in
// backquotes, in docs/api.md: reason codes are the API's contract (clients branch on them), so
// one the docs do not name is one a client cannot know to handle.
func TestEveryReasonCodeIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "vocabulary.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := 0
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ReasonCode" {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: not a string literal", name.Name)
				}
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes++
				if !strings.Contains(string(doc), "`"+code+"`") {
					t.Errorf("%s (%q) is not in docs/api.md", name.Name, code)
				}
			}
		}
	}
	if codes < 20 {
		t.Fatalf("found %d ReasonCode constants in vocabulary.go; the parse missed them", codes)
	}
}

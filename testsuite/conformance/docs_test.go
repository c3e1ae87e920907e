package conformance_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kunobi-ninja/kobe/backends"
)

// root is the repository, from this package's directory.
const root = "../.."

func readPage(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs/backends", name))
	require.NoError(t, err)
	return string(data)
}

// docs/backends/contract.md is the contract as rules: every interface of package backends (the
// contract and each optional capability), every field of a registration and every trait has
// its row.
func TestTheContractPageNamesEveryRule(t *testing.T) {
	page := readPage(t, "contract.md")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, "backends", "*.go"))
	require.NoError(t, err)
	var interfaces []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if _, ok := ts.Type.(*ast.InterfaceType); ok {
					interfaces = append(interfaces, ts.Name.Name)
				}
			}
			return true
		})
	}
	require.Greater(t, len(interfaces), 10, "the interfaces of package backends")
	names := interfaces
	for _, v := range []any{backends.Factory{}, backends.Traits{}} {
		for _, f := range reflect.VisibleFields(reflect.TypeOf(v)) {
			names = append(names, f.Name)
		}
	}
	for _, name := range names {
		named := strings.Contains(page, "`"+name+"`") || strings.Contains(page, "`backends."+name+"`")
		assert.True(t, named, "docs/backends/contract.md names %s", name)
	}
}

// docs/backends/adding.md stays true: the files it names exist, the command it gives runs a test
// that exists, and its registration names only fields a registration has.
func TestTheAddingPageIsTrue(t *testing.T) {
	page := readPage(t, "adding.md")

	paths := 0
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9_./-]*/[a-z0-9_./-]*)`").FindAllStringSubmatch(page, -1) {
		if strings.HasPrefix(m[1], "github.com/") {
			continue
		}
		paths++
		_, err := os.Stat(filepath.Join(root, m[1]))
		assert.NoError(t, err, "adding.md names %s", m[1])
	}
	assert.Greater(t, paths, 5, "the files the page names")

	commands := regexp.MustCompile(`(?m)^go test .*-run (\w+).*$|^go test .*(\./\S+)`).FindAllString(page, -1)
	require.NotEmpty(t, commands, "the page gives the command that runs the fixture's conformance")
	for _, command := range commands {
		run := regexp.MustCompile(`-run (\w+)`).FindStringSubmatch(command)
		pkg := regexp.MustCompile(`\./(\S+)`).FindStringSubmatch(command)
		require.True(t, run != nil && pkg != nil, "a command with -run and a package: %s", command)
		tests, err := filepath.Glob(filepath.Join(root, pkg[1], "*_test.go"))
		require.NoError(t, err)
		found := false
		for _, f := range tests {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			found = found || strings.Contains(string(data), "func "+run[1]+"(t *testing.T)")
		}
		assert.True(t, found, "%s: no test %s in %s", command, run[1], pkg[1])
	}

	registration := page[strings.Index(page, "backends.Register(backends.Factory{"):]
	registration = registration[:strings.Index(registration, "})")]
	fields := regexp.MustCompile(`(?m)^\s+([A-Z]\w*):`).FindAllStringSubmatch(registration, -1)
	require.NotEmpty(t, fields)
	for _, f := range fields {
		_, ok := reflect.TypeOf(backends.Factory{}).FieldByName(f[1])
		assert.True(t, ok, "adding.md registers a backends.Factory with %s", f[1])
	}
}

// The fixture backend is added by its package and one import line: no file of kobe outside its
// package names it, but that line in TestABackendIsOnePackage's file.
func TestTheFixtureIsOneImportLine(t *testing.T) {
	const pkg = "testsuite/conformance/fixturebackend"
	// What would name it: its import path, or an identifier it exports (written here so that
	// this test does not find itself).
	importPath, qualifier := `"github.com/kunobi-ninja/kobe/`+pkg+`"`, path.Base(pkg)+"."
	var lines []string
	err := filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, file)
		if d.IsDir() && (rel == pkg || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(file, ".go") {
			return nil
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, importPath) || strings.Contains(line, qualifier) {
				lines = append(lines, rel+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{`testsuite/conformance/fixture_test.go: _ "github.com/kunobi-ninja/kobe/` + pkg + `" // the one line docs/backends/adding.md speaks of`}, lines)
}

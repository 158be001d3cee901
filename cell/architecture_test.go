package cell_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// domainPackages are the packages at the centre: they must not link the database driver or the
// HTTP framework, directly or not.
var domainPackages = []string{"cell/object", "cell/design", "cell/content", "cell/catalog", "cell/auth/scope"}

// forbidden are the module paths a domain package must not link.
var forbidden = []string{"github.com/jackc/pgx", "github.com/danielgtaylor/huma"}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".." // the module root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestArchitecture checks the rules of docs/architecture.md: the domain packages link no pgx
// and no huma, and the table of imports between the cell's packages is the one go list reports.
func TestArchitecture(t *testing.T) {
	for _, p := range domainPackages {
		deps := goList(t, "-deps", "slidecells/"+p)
		for _, f := range forbidden {
			if i := slices.IndexFunc(deps, func(d string) bool { return strings.HasPrefix(d, f) }); i >= 0 {
				t.Errorf("domain package %s links %s: the domain imports no database driver and no HTTP framework (docs/architecture.md)", p, deps[i])
			}
		}
	}

	actual := map[string]string{}
	for _, line := range goList(t, "-f", `{{.ImportPath}}|{{join .Imports " "}}`, "./cell/...") {
		pkg, imports, _ := strings.Cut(line, "|")
		var in []string
		for _, i := range strings.Fields(imports) {
			if i == "slidecells/cell" || strings.HasPrefix(i, "slidecells/cell/") {
				in = append(in, strings.TrimPrefix(i, "slidecells/"))
			}
		}
		slices.Sort(in)
		for i := range in {
			in[i] = "`" + in[i] + "`"
		}
		row := "—"
		if len(in) > 0 {
			row = strings.Join(in, ", ")
		}
		actual[strings.TrimPrefix(pkg, "slidecells/")] = row
	}

	documented := map[string]string{}
	f, err := os.Open("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "<!-- imports:begin -->":
			in = true
		case line == "<!-- imports:end -->":
			in = false
		case in && strings.HasPrefix(line, "| `"):
			cols := strings.Split(strings.Trim(line, "| "), " | ")
			if len(cols) != 2 {
				t.Fatalf("docs/architecture.md: malformed row %q", line)
			}
			documented[strings.Trim(cols[0], "`")] = cols[1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(documented) == 0 {
		t.Fatal("docs/architecture.md: no import table between <!-- imports:begin --> and <!-- imports:end -->")
	}
	for pkg, row := range actual {
		if doc, ok := documented[pkg]; !ok {
			t.Errorf("docs/architecture.md does not list %s; add the row:\n| `%s` | %s |", pkg, pkg, row)
		} else if doc != row {
			t.Errorf("docs/architecture.md: %s imports %s, the table says %s; fix the row:\n| `%s` | %s |", pkg, row, doc, pkg, row)
		}
	}
	for pkg := range documented {
		if _, ok := actual[pkg]; !ok {
			t.Errorf("docs/architecture.md lists %s, which is no package of the cell", pkg)
		}
	}
}

// wireFreePackages hold the domain and its services: the wire format (request and response
// shapes with their schema tags) lives in cell/api, so that the OpenAPI document is defined in
// one package.
var wireFreePackages = []string{"object", "design", "content", "catalog", "authoring", "jobs"}

// schemaTags are the struct tag keys huma reads to build a schema or bind a parameter.
var schemaTags = []string{"doc", "format", "enum", "default", "example", "minimum", "exclusiveMinimum",
	"maximum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "patternDescription",
	"minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "readOnly", "writeOnly",
	"deprecated", "hidden", "nullable", "required", "dependentRequired", "contentEncoding",
	"contentMediaType", "path", "query", "header", "cookie"}

// TestDomainHoldsNoWireFormat fails when a domain or service package imports huma or declares a
// struct field with a schema tag (doc:"…", pattern:"…", …): the wire shape belongs in cell/api.
func TestDomainHoldsNoWireFormat(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for _, dir := range wireFreePackages {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files++
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/danielgtaylor/huma") {
					t.Errorf("%s imports %s: the HTTP framework belongs in cell/api", name, p)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				field, ok := n.(*ast.Field)
				if !ok || field.Tag == nil {
					return true
				}
				tag, err := strconv.Unquote(field.Tag.Value)
				if err != nil {
					t.Fatalf("%s: %v", fset.Position(field.Pos()), err)
				}
				for _, k := range schemaTags {
					if _, ok := reflect.StructTag(tag).Lookup(k); ok {
						t.Errorf("%s: struct tag %s:\"…\" is wire format; declare the shape in cell/api and convert", fset.Position(field.Pos()), k)
					}
				}
				return true
			})
		}
	}
	if files < 2*len(wireFreePackages) {
		t.Fatalf("parsed %d files in %v: the package list is stale", files, wireFreePackages)
	}
}

package compile_test

import (
	"context"
	"testing"

	"slidecells/cell/compile"
)

func TestWarningsDoNotFailACompile(t *testing.T) {
	t.Parallel()
	res, err := newCompiler(t, 1).Compile(context.Background(), compile.Request{Kind: compile.KindPage,
		Entry:    tsx("import Card from '@components/card'\nconst o = { a: 1, a: 2 }\nexport default () => <Card o={o} />\n"),
		Resolver: &resolver{comps: components{"card": tsx("export default (p: { n?: number }) => p.n === -0 ? <i /> : <b />\n")}}})
	if err != nil || !res.OK() || len(res.Code) == 0 {
		t.Fatalf("Compile = %v, %v", res, err)
	}
	want := []struct {
		file string
		line int
	}{{"page.tsx", 2}, {"@components/card", 1}}
	if len(res.Diagnostics) != len(want) {
		t.Fatalf("diagnostics:\n%s", list(res.Diagnostics))
	}
	for i, w := range want {
		d := res.Diagnostics[i]
		if d.File != w.file || d.Line != w.line || d.Severity != compile.SeverityWarning || d.Code != compile.CodeWarning {
			t.Errorf("diagnostic %d = %v, want a warning in %s line %d", i, d, w.file, w.line)
		}
	}
}

package compile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"slidecells/cell/compile"
)

// FuzzCompile feeds arbitrary source as the entry and as a component it may
// import. Whatever the source, Compile must not panic or fail with a Go error,
// and its answer must be consistent: code with the right digest and no error,
// or errors and no code.
//
//	go test ./cell/compile -run '^$' -fuzz FuzzCompile -fuzztime 60s
func FuzzCompile(f *testing.F) {
	for _, seed := range []struct {
		src  string
		mode uint8
	}{
		{simple, 0},
		{hero, 1},
		{"import X from '@components/x'\nexport default X\n", 0},
		{"import X from '@components/self'\nexport default X\n", 2},
		{"import A from '@components/a'\nimport { Slide } from '@kit/layout'\nexport default () => <Slide><A /></Slide>\n", 0},
		{"export default function P() { return <div>\n  <p>é😀 {1 +}</p></div> }", 1},
		{"const m = 'x'; import(m); require(m); export default 1", 0},
		{"/** @jsxImportSource preact */\nexport default () => <b />", 0},
		{"<!doctype html><p>hi</p><script src=x></script>", 3},
		{"\xff\x00<p", 3},
		{"import x from './x'\nimport 'https://a/b'\nexport * from 'node:fs'", 0},
		{"export default <T,>(p: T) => p as unknown as string", 0},
		{"`${", 1},
	} {
		f.Add(seed.src, seed.mode)
	}
	c, err := compile.New(compile.Options{Slots: 1, KitItems: kit})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string, mode uint8) {
		// mode: 0 tsx page, 1 jsx page, 2 tsx component "self", 3 html page.
		req := compile.Request{Kind: compile.KindPage, Entry: compile.Module{FileType: compile.TSX, Source: []byte(src)}}
		switch mode % 4 {
		case 1:
			req.Entry.FileType = compile.JSX
		case 2:
			req.Kind, req.Entry.Key = compile.KindComponent, "self"
		case 3:
			req.Entry.FileType = compile.HTML
		}
		req.Resolver = &resolver{comps: components{
			"x": tsx(src),
			"a": tsx("import B from '@components/b'\nexport default B\n"),
			"b": jsx("export default () => null\n"),
		}}
		res, err := c.Compile(context.Background(), req)
		if err != nil {
			t.Fatalf("Compile returned a Go error for a source problem: %v", err)
		}
		if res.OK() {
			sum := sha256.Sum256(res.Code)
			if len(res.Code) == 0 || res.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
				t.Fatalf("ok result with %d bytes and digest %q", len(res.Code), res.Digest)
			}
			return
		}
		if res.Code != nil || res.Digest != "" {
			t.Fatalf("failed result with code or digest")
		}
		for _, d := range res.Diagnostics {
			if d.Code == "" || d.Line < 0 || d.Column < 0 || (d.Line == 0) != (d.Column == 0) ||
				!(strings.HasPrefix(d.File, "page.") || strings.HasPrefix(d.File, "@components/")) {
				t.Fatalf("malformed diagnostic %v", d)
			}
		}
	})
}

package content

import (
	"slices"
	"strings"
	"testing"

	"slidecells/shared/problem"
)

func fieldsOf(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	for _, f := range problem.As(err).Fields {
		out = append(out, f.Field)
	}
	return out
}

func TestCheckTags(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []string
		want []string
		ok   bool
	}{
		{"sorted without duplicates", []string{"logo", "hero", "logo"}, []string{"hero", "logo"}, true},
		{"charset", []string{"a.b_c:d-e"}, []string{"a.b_c:d-e"}, true},
		{"upper case", []string{"Logo"}, nil, false},
		{"leading dash", []string{"-x"}, nil, false},
		{"too many", func() (out []string) {
			for i := 0; i <= MaxAssetTags; i++ {
				out = append(out, "t"+strings.Repeat("x", i))
			}
			return out
		}(), nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := CheckTags("tags", c.in)
			if (err == nil) != c.ok || (c.ok && !slices.Equal(got, c.want)) {
				t.Fatalf("CheckTags(%v) = %v %v", c.in, got, err)
			}
		})
	}
}

func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name, in string
		optional bool
		ok       bool
	}{
		{"plain", "logo.png", false, true},
		{"empty optional", "", true, true},
		{"empty required", "", false, false},
		{"white space", "   ", false, false},
		{"control", "a\x00b", false, false},
		{"too long", strings.Repeat("é", MaxAssetNameLen+1), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := CheckName("name", c.in, c.optional); (err == nil) != c.ok {
				t.Fatalf("CheckName(%q) = %v", c.in, err)
			}
		})
	}
}

func TestParseIfMatch(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name, in string
		ok       bool
	}{
		{"quoted", `"` + sha + `"`, true},
		{"bare", sha, true},
		{"upper case", `"` + strings.ToUpper(sha) + `"`, true},
		{"weak", `W/"` + sha + `"`, false},
		{"star", "*", false},
		{"missing", "", false},
		{"short", `"abc"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseIfMatch(c.in)
			if (err == nil) != c.ok || (c.ok && got != sha) {
				t.Fatalf("ParseIfMatch(%q) = %q %v", c.in, got, err)
			}
		})
	}
}

func TestETagMatches(t *testing.T) {
	for _, c := range []struct {
		name, header string
		want         bool
	}{
		{"exact", `"abc"`, true},
		{"weak", `W/"abc"`, true},
		{"in a list", `"x", "abc"`, true},
		{"star", `*`, true},
		{"other", `"abd"`, false},
		{"unquoted", `abc`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ETagMatches(c.header, "abc"); got != c.want {
				t.Fatalf("ETagMatches(%q) = %v", c.header, got)
			}
		})
	}
}

func TestCheckRouteTree(t *testing.T) {
	node := func(seg string, children ...RouteNode) RouteNode { return RouteNode{Segment: seg, Children: children} }
	deep := node("a")
	for i := 0; i < maxRouteDepth; i++ {
		deep = node("a", deep)
	}
	for _, c := range []struct {
		name string
		tree RouteTree
		want []string
	}{
		{"root and children", RouteTree{Routes: []RouteNode{node(""), node("intro", node("one"))}}, nil},
		{"duplicate path", RouteTree{Routes: []RouteNode{node("intro"), node("intro")}}, []string{"route_tree.routes[1].segment"}},
		{"nested root", RouteTree{Routes: []RouteNode{node("intro", node(""))}}, []string{"route_tree.routes[0].children[0].segment"}},
		{"too deep", RouteTree{Routes: []RouteNode{deep}}, []string{"route_tree.routes[0]" + strings.Repeat(".children[0]", maxRouteDepth)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, fe := checkRouteTree(c.tree)
			var got []string
			for _, f := range fe {
				got = append(got, f.Field)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("fields %v, want %v", got, c.want)
			}
		})
	}
	refs, _ := checkRouteTree(RouteTree{Routes: []RouteNode{{Segment: "a", PageID: "pg_1"}}})
	if refs["pg_1"] != "route_tree.routes[0].page_id" {
		t.Fatalf("refs %v", refs)
	}
}

func TestChanges(t *testing.T) {
	name, tags := "", []string{"B", "a"}
	meta := map[string]any{"alt": strings.Repeat("x", MaxAssetMetadataBytes)}
	for _, c := range []struct {
		name string
		err  error
		want []string
	}{
		{"empty name", func() error { _, err := Changes(&name, nil, nil); return err }(), []string{"name"}},
		{"bad tag", func() error { _, err := Changes(nil, &tags, nil); return err }(), []string{"tags"}},
		{"metadata too large", func() error { _, err := Changes(nil, nil, &meta); return err }(), []string{"metadata"}},
		{"nothing", func() error { _, err := Changes(nil, nil, nil); return err }(), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fieldsOf(c.err); !slices.Equal(got, c.want) {
				t.Fatalf("fields %v, want %v", got, c.want)
			}
		})
	}
}

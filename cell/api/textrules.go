package api

import (
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

// nameKeys are the JSON properties the name rule (shared/textrule) applies to wherever an
// operation's body schema declares them as strings: the names and titles of projects, pages,
// components, styles, themes, assets and font families. Free-form objects (metadata) declare
// no properties, so their keys are not names.
var nameKeys = map[string]bool{"name": true, "title": true, "family_name": true}

// nameFieldIndex holds, for every operation, the body paths (array indexes as [], e.g.
// body.pages[].title) that hold a name, computed once from the OpenAPI document the registry
// built.
type nameFieldIndex struct {
	once sync.Once
	byOp map[string]map[string]bool
}

// nameFields are the name paths of op's body.
func (s *Server) nameFields(op Operation) map[string]bool {
	s.names.once.Do(func() { s.names.byOp = s.buildNameFields() })
	return s.names.byOp[op.ID]
}

func (s *Server) buildNameFields() map[string]map[string]bool {
	doc := s.API.OpenAPI()
	out := map[string]map[string]bool{}
	for _, op := range s.ops {
		item := doc.Paths[op.Path]
		if item == nil {
			continue
		}
		var hop *huma.Operation
		switch op.Method {
		case "POST":
			hop = item.Post
		case "PUT":
			hop = item.Put
		case "PATCH":
			hop = item.Patch
		case "DELETE":
			hop = item.Delete
		}
		if hop == nil || hop.RequestBody == nil {
			continue
		}
		mt := hop.RequestBody.Content["application/json"]
		if mt == nil || mt.Schema == nil {
			continue
		}
		paths := map[string]bool{}
		walkNames(doc.Components.Schemas, mt.Schema, "body", "", 0, paths)
		if len(paths) > 0 {
			out[op.ID] = paths
		}
	}
	return out
}

func walkNames(reg huma.Registry, sc *huma.Schema, path, key string, depth int, out map[string]bool) {
	if sc == nil || depth > 12 {
		return
	}
	if sc.Ref != "" {
		walkNames(reg, reg.SchemaFromRef(sc.Ref), path, key, depth+1, out)
		return
	}
	for _, alts := range [][]*huma.Schema{sc.AllOf, sc.OneOf, sc.AnyOf} {
		for _, a := range alts {
			walkNames(reg, a, path, key, depth+1, out)
		}
	}
	switch {
	case sc.Type == "string" || strings.Contains(sc.Type, "string"):
		if nameKeys[key] {
			out[path] = true
		}
	case sc.Type == "array":
		walkNames(reg, sc.Items, path+"[]", "", depth+1, out)
	default:
		for name, p := range sc.Properties {
			walkNames(reg, p, path+"."+name, name, depth+1, out)
		}
	}
}

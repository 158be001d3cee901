package api

import "slidecells/cell/store"

// registerDesign adds the design system: themes and styles under /api/v1, and the editor-facing
// workspace fonts (families, faces, the per-family @font-face bundle) under
// /workspaces/{workspace_id}. docs/design-system.md describes fields, limits and rules.
func (s *Server) registerDesign(st *store.Store) {
	s.registerThemes(st)
	s.registerStyles(st)
	s.registerFonts(st)
}

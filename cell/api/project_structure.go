package api

import "slidecells/cell/store"

// registerProjectStructure adds project configuration, route tree, apply-style, build assets and
// the project's pages.
func (s *Server) registerProjectStructure(st *store.Store) {}

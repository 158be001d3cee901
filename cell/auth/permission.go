package auth

import "slidecells/cell/auth/scope"

// Permission is a scope name an operation requires (scope.Permission), as the specification
// lists them (directory.Scopes). Operations declare these constants, never free strings.
type Permission = scope.Permission

// The scopes of the specification.
const (
	WorkspaceRead     Permission = "workspace:read"
	ProjectRead       Permission = "project:read"
	ProjectWrite      Permission = "project:write"
	PageRead          Permission = "page:read"
	PageWrite         Permission = "page:write"
	ComponentRead     Permission = "component:read"
	ComponentWrite    Permission = "component:write"
	AssetRead         Permission = "asset:read"
	AssetWrite        Permission = "asset:write"
	DesignSystemRead  Permission = "design-system:read"
	DesignSystemWrite Permission = "design-system:write"
	PreviewRun        Permission = "preview:run"
)

package api

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// Paging: every list takes limit and cursor and answers next_cursor (docs/api-conventions.md,
// "Pagination"). A cursor is opaque to clients: the position after which the next page starts,
// tagged with the list it belongs to (the operation, the workspace or the user, and the object
// the path names). A cursor of another list, another workspace or user, or one that is not a
// cursor at all is 422 at query.cursor, never silently a first page.

// cursorTagBytes is the length of a cursor's list tag.
const cursorTagBytes = 8

// listIdentity names one list: the operation, whose it is, and the object of its path.
func listIdentity(ctx huma.Context) string {
	parts := []string{ctx.Operation().OperationID}
	if sc := ScopeFrom(ctx.Context()); sc.WorkspaceID() != "" {
		parts = append(parts, "ws", sc.WorkspaceID())
	} else if p := PrincipalFrom(ctx.Context()); p.UserID != "" {
		parts = append(parts, "user", p.UserID)
	}
	for _, m := range pathParam.FindAllStringSubmatch(ctx.Operation().Path, -1) {
		parts = append(parts, m[1], ctx.Param(m[1]))
	}
	return strings.Join(parts, "\x00")
}

func cursorTag(list string) []byte {
	sum := sha256.Sum256([]byte(list))
	return sum[:cursorTagBytes]
}

// encodeCursor is the cursor of position in list.
func encodeCursor(list, position string) string {
	return base64.RawURLEncoding.EncodeToString(append(cursorTag(list), position...))
}

// decodeCursor is the position a cursor of list names; ok is false for anything else.
func decodeCursor(list, cursor string) (position string, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) <= cursorTagBytes || string(raw[:cursorTagBytes]) != string(cursorTag(list)) {
		return "", false
	}
	return string(raw[cursorTagBytes:]), true
}

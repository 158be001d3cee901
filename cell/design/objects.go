package design

import (
	"encoding/json"
	"errors"
	"slidecells/cell/object"
	"strings"
)

// The design system's objects as the cell stores them: themes, styles, font families and
// their faces. cell/store reads and writes them; the rules that make them live in this package.

// FontRoles are the typography roles of a theme, in output order.
var FontRoles = []string{"heading", "body", "code"}

// ThemeFont is a theme's typography for one role: a workspace font family (FamilyID) or a
// platform preset token (Preset), exactly one of them.
type ThemeFont struct {
	FamilyID   string
	FamilyName string // read only: the bound family's current name
	Preset     string
}

// Theme is a theme as stored. Colors, Spacing and Radius are stored as validated by the API.
type Theme struct {
	object.Object
	Key     string
	Name    string
	Colors  map[string]string
	Spacing []int
	Radius  []int
	Fonts   map[string]ThemeFont // by role; every role is present
	Version int64
	object.Stamps
}

// UnknownFamilyError names the roles whose font family does not exist in the workspace.
type UnknownFamilyError struct {
	Roles []string
}

func (e *UnknownFamilyError) Error() string {
	return "unknown font family for roles " + strings.Join(e.Roles, ", ")
}

// Style is a style as stored: a name and one normalised presentation snapshot.
type Style struct {
	object.Object
	Name           string
	Snapshot       json.RawMessage // canonical JSON, as normalised by the API
	SnapshotDigest string
	ThemeKey       string // the snapshot's theme reference, "" for none
	Version        int64
	object.Stamps
}

// ErrUnknownThemeKey is returned when a style names a theme key no live theme of the workspace
// has.
var ErrUnknownThemeKey = errors.New("store: unknown theme key")

// FontFamily is a workspace font family with its faces.
type FontFamily struct {
	ID      string
	Name    string
	Version int64
	Faces   []FontFace // every face, enabled or not, ordered by ID
	object.Stamps
}

// FontFace is one face: an uploaded font asset and its @font-face descriptors.
type FontFace struct {
	ID         string
	FamilyID   string
	FamilyName string
	FaceFields
	Version int64
	object.Stamps
}

// FaceFields are a face's asset and descriptors.
type FaceFields struct {
	AssetID      string
	WeightMin    int
	WeightMax    int
	Style        string
	Display      string
	UnicodeRange string
	Enabled      bool
}

// FontFaceInput is a face to create. The caller has validated every field; FamilyName is found
// or created (case-insensitively) in the workspace.
type FontFaceInput struct {
	FamilyName string
	FaceFields
}

// FontFacePatch changes a face; nil fields keep their value. A FamilyName moves the face to
// that family, found or created by name.
type FontFacePatch struct {
	FamilyName   *string
	AssetID      *string
	WeightMin    *int // set together with WeightMax
	WeightMax    *int
	Style        *string
	Display      *string
	UnicodeRange *string
	Enabled      *bool
}

// FaceAssetError says the asset a face names is not a live font asset of the workspace: it is
// Missing (absent, archived or foreign alike), or its content is of ContentType.
type FaceAssetError struct {
	Missing     bool
	ContentType string
}

// FamilyNameKey is the key under which family names are unique in a workspace: names differing
// only in letter case are the same family.
func FamilyNameKey(name string) string { return strings.ToLower(name) }
func (e *FaceAssetError) Error() string {
	if e.Missing {
		return "store: the face's asset is not a live asset of the workspace"
	}
	return "store: the face's asset is " + e.ContentType + ", not a font"
}

package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"slidecells/cell/snapshot"
	"slidecells/shared/digest"
	"slidecells/shared/ids"
)

func bucket(t *testing.T) *gcblob.Bucket {
	t.Helper()
	b, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func object(ws, name, contentType string) snapshot.Object {
	d := digest.Bytes([]byte(name))
	return snapshot.Object{Key: "ws/" + ws + "/blobs/" + strings.TrimPrefix(d, "sha256:"), Digest: d, Bytes: int64(len(name)), ContentType: contentType}
}

// manifest is a complete, checked manifest of workspace ws: a page with one component, a font
// and two assets.
// saved is a bucket holding the manifest of a new workspace, saved.
func saved(t *testing.T) (context.Context, *gcblob.Bucket, string, *snapshot.Manifest) {
	t.Helper()
	ctx, b, ws := context.Background(), bucket(t), ids.New(ids.Workspace)
	m := manifest(t, ws)
	if err := snapshot.Save(ctx, b, m); err != nil {
		t.Fatal(err)
	}
	return ctx, b, ws, m
}

func manifest(t *testing.T, ws string) *snapshot.Manifest {
	t.Helper()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	m := &snapshot.Manifest{
		Schema: snapshot.Schema, Ref: ids.New(ids.Snapshot), WorkspaceID: ws, Owner: "job_x",
		Entity:     snapshot.Entity{Kind: snapshot.KindPage, ID: ids.New(ids.Page), Key: "intro", Version: 3},
		FileType:   "tsx",
		Route:      "/intro",
		Module:     object(ws, "module code", "text/javascript; charset=utf-8"),
		Components: []snapshot.Component{{Key: "card", ID: ids.New(ids.Component), Version: 2, Digest: digest.Bytes([]byte("card v2"))}},
		Scenes:     []string{"default"},
		Styles:     object(ws, ":root{}", "text/css; charset=utf-8"),
		Fonts:      []snapshot.Object{object(ws, "font bytes", "font/woff2")},
		Assets: []snapshot.Asset{
			{ID: ids.New(ids.Asset), Object: object(ws, "logo png", "image/png")},
			{ID: ids.New(ids.Asset), Object: object(ws, "photo jpg", "image/jpeg")},
		},
		Presentation: json.RawMessage(`{"page_width":1920,"page_height":1080,"theme_key":"brand"}`),
		HostBuild:    "host-1",
		Canvas:       snapshot.Canvas{Width: 1920, Height: 1080, DeviceScaleFactor: 1},
		CreatedAt:    now,
		ExpiresAt:    now.Add(time.Hour),
	}
	d, err := m.ComputeInputDigest()
	if err != nil {
		t.Fatal(err)
	}
	m.InputDigest = d
	return m
}

// clone is a deep copy through JSON, as a manifest read back is.
func clone(t *testing.T, m *snapshot.Manifest) *snapshot.Manifest {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var c snapshot.Manifest
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func inputDigest(t *testing.T, m *snapshot.Manifest) string {
	t.Helper()
	d, err := m.ComputeInputDigest()
	if err != nil {
		t.Fatal(err)
	}
	if !digest.Valid(d) {
		t.Fatalf("input digest %q is not a digest", d)
	}
	return d
}

func TestManifestKey(t *testing.T) {
	ws, ref := ids.New(ids.Workspace), ids.New(ids.Snapshot)
	if got, want := snapshot.ManifestKey(ws, ref), "ws/"+ws+"/snapshots/"+ref+".json"; got != want {
		t.Fatalf("ManifestKey = %q, want %q", got, want)
	}
	// Two workspaces never share a manifest key for one ref.
	if snapshot.ManifestKey(ids.New(ids.Workspace), ref) == snapshot.ManifestKey(ws, ref) {
		t.Fatal("the key does not depend on the workspace")
	}
}

// TestInputDigestStable: equal inputs give equal digests, whatever identity, timing and key
// order the manifests carry.
func TestInputDigestStable(t *testing.T) {
	ws := ids.New(ids.Workspace)
	m := manifest(t, ws)
	base := inputDigest(t, m)
	if base != inputDigest(t, m) || base != inputDigest(t, clone(t, m)) {
		t.Fatal("the digest of equal inputs differs")
	}
	for _, c := range []struct {
		name   string
		change func(m *snapshot.Manifest)
	}{
		{"another ref", func(m *snapshot.Manifest) { m.Ref = ids.New(ids.Snapshot) }},
		{"another owner", func(m *snapshot.Manifest) { m.Owner = "validation:usr_x" }},
		{"other times", func(m *snapshot.Manifest) {
			m.CreatedAt, m.ExpiresAt = m.CreatedAt.Add(time.Hour), m.ExpiresAt.Add(time.Hour)
		}},
		{"the stored input digest", func(m *snapshot.Manifest) { m.InputDigest = "" }},
		{"the canvas (part of the render digest)", func(m *snapshot.Manifest) { m.Canvas.Width, m.Canvas.DeviceScaleFactor = 1280, 2 }},
		{"presentation key order and spacing", func(m *snapshot.Manifest) {
			m.Presentation = json.RawMessage(`{ "theme_key": "brand", "page_height": 1080, "page_width": 1920 }`)
		}},
		{"the module's storage key", func(m *snapshot.Manifest) { m.Module.Key = "ws/" + ws + "/modules/other" }},
		// The digest is of this package's schema (Check refuses a manifest of another).
		{"the manifest's schema field", func(m *snapshot.Manifest) { m.Schema = "render-snapshot.v2" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m2 := clone(t, m)
			c.change(m2)
			if got := inputDigest(t, m2); got != base {
				t.Fatalf("digest changed: %s != %s", got, base)
			}
		})
	}
}

// TestInputDigestPinsEveryInput: a change to any pinned input changes the digest.
func TestInputDigestPinsEveryInput(t *testing.T) {
	ws := ids.New(ids.Workspace)
	m := manifest(t, ws)
	base := inputDigest(t, m)
	other := digest.Bytes([]byte("other"))
	for _, c := range []struct {
		name   string
		change func(m *snapshot.Manifest)
	}{
		{"entity kind", func(m *snapshot.Manifest) { m.Entity.Kind = snapshot.KindComponent }},
		{"file type", func(m *snapshot.Manifest) { m.FileType = "jsx" }},
		{"route", func(m *snapshot.Manifest) { m.Route = "/outro" }},
		{"module", func(m *snapshot.Manifest) { m.Module.Digest = other }},
		{"a component's digest", func(m *snapshot.Manifest) { m.Components[0].Digest = other }},
		{"a component's version", func(m *snapshot.Manifest) { m.Components[0].Version = 3 }},
		{"a component's key", func(m *snapshot.Manifest) { m.Components[0].Key = "card2" }},
		{"a component added", func(m *snapshot.Manifest) {
			m.Components = append(m.Components, snapshot.Component{Key: "chart", Digest: other})
		}},
		{"no components", func(m *snapshot.Manifest) { m.Components = nil }},
		{"scenes", func(m *snapshot.Manifest) { m.Scenes = []string{"default", "dark"} }},
		{"styles", func(m *snapshot.Manifest) { m.Styles.Digest = other }},
		{"presentation", func(m *snapshot.Manifest) {
			m.Presentation = json.RawMessage(`{"page_width":1920,"page_height":1080,"theme_key":"night"}`)
		}},
		{"a font", func(m *snapshot.Manifest) { m.Fonts[0].Digest = other }},
		{"a font removed", func(m *snapshot.Manifest) { m.Fonts = nil }},
		{"an asset's content", func(m *snapshot.Manifest) { m.Assets[1].Digest = other }},
		{"an asset's ID", func(m *snapshot.Manifest) { m.Assets[0].ID = ids.New(ids.Asset) }},
		{"assets swapped", func(m *snapshot.Manifest) {
			m.Assets[0].Object, m.Assets[1].Object = m.Assets[1].Object, m.Assets[0].Object
		}},
		{"host build", func(m *snapshot.Manifest) { m.HostBuild = "host-2" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m2 := clone(t, m)
			c.change(m2)
			if got := inputDigest(t, m2); got == base {
				t.Fatalf("the digest ignores the %s", c.name)
			}
		})
	}
}

// TestCheck: a manifest read back must be of its schema, its key's workspace and ref, list only
// objects of its workspace with digests, and match its input digest.
func TestCheck(t *testing.T) {
	ws, otherWS := ids.New(ids.Workspace), ids.New(ids.Workspace)
	m := manifest(t, ws)
	if err := m.Check(ws, m.Ref); err != nil {
		t.Fatalf("a good manifest: %v", err)
	}
	foreign := object(otherWS, "stolen", "image/png")
	for _, c := range []struct {
		name   string
		ws     string
		ref    string
		change func(m *snapshot.Manifest)
	}{
		{"another schema", "", "", func(m *snapshot.Manifest) { m.Schema = "render-snapshot.v0" }},
		{"checked as another workspace's", otherWS, "", nil},
		{"checked under another ref", "", ids.New(ids.Snapshot), nil},
		{"its workspace changed", "", "", func(m *snapshot.Manifest) { m.WorkspaceID = otherWS }},
		{"its ref changed", "", "", func(m *snapshot.Manifest) { m.Ref = ids.New(ids.Snapshot) }},
		{"a ref that is no snapshot ID", "", "prv_x", func(m *snapshot.Manifest) { m.Ref = "prv_x" }},
		{"a module of another workspace", "", "", func(m *snapshot.Manifest) { m.Module.Key = foreign.Key }},
		{"styles of another workspace", "", "", func(m *snapshot.Manifest) { m.Styles.Key = foreign.Key }},
		{"a font of another workspace", "", "", func(m *snapshot.Manifest) { m.Fonts[0].Key = foreign.Key }},
		{"an asset of another workspace", "", "", func(m *snapshot.Manifest) { m.Assets[1].Key = foreign.Key }},
		{"an asset under a workspace ID's prefix", "", "", func(m *snapshot.Manifest) { m.Assets[0].Key = "ws/" + ws + "x/blobs/a" }},
		{"an object outside any workspace", "", "", func(m *snapshot.Manifest) { m.Fonts[0].Key = "blobs/" + m.Fonts[0].Hex() }},
		{"an object without a digest", "", "", func(m *snapshot.Manifest) { m.Assets[0].Digest = "" }},
		{"an object with a malformed digest", "", "", func(m *snapshot.Manifest) { m.Styles.Digest = "md5:abc" }},
		{"content changed after the digest", "", "", func(m *snapshot.Manifest) { m.Route = "/elsewhere" }},
		{"no input digest", "", "", func(m *snapshot.Manifest) { m.InputDigest = "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m2 := clone(t, m)
			if c.change != nil {
				c.change(m2)
			}
			wsArg, refArg := ws, m.Ref
			if c.ws != "" {
				wsArg = c.ws
			}
			if c.ref != "" {
				refArg = c.ref
			}
			if err := m2.Check(wsArg, refArg); err == nil {
				t.Fatal("Check passed")
			}
		})
	}
}

// TestObject: the objects a manifest lists are found by their hex digest; nothing else is.
func TestObject(t *testing.T) {
	ws := ids.New(ids.Workspace)
	m := manifest(t, ws)
	for _, o := range []snapshot.Object{m.Module, m.Styles, m.Fonts[0], m.Assets[0].Object, m.Assets[1].Object} {
		got, ok := m.Object(o.Hex())
		if !ok || got != o {
			t.Fatalf("Object(%s) = %+v %v, want %+v", o.Hex(), got, ok, o)
		}
		if strings.HasPrefix(o.Hex(), "sha256:") || len(o.Hex()) != 64 {
			t.Fatalf("Hex() = %q", o.Hex())
		}
	}
	for _, hex := range []string{strings.TrimPrefix(m.Components[0].Digest, "sha256:"), strings.TrimPrefix(digest.Bytes([]byte("x")), "sha256:"), "", m.Module.Digest} {
		if o, ok := m.Object(hex); ok {
			t.Fatalf("Object(%q) found %+v", hex, o)
		}
	}
}

func TestSaveLoad(t *testing.T) {
	ctx, b, ws, m := saved(t)
	got, err := snapshot.Load(ctx, b, ws, m.Ref)
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	mj, _ := json.Marshal(m)
	if !bytes.Equal(gj, mj) {
		t.Fatalf("loaded %s\nsaved %s", gj, mj)
	}
	attrs, err := b.Attributes(ctx, snapshot.ManifestKey(ws, m.Ref))
	if err != nil || attrs.ContentType != "application/json" {
		t.Fatalf("manifest attributes: %+v %v", attrs, err)
	}
}

// TestSaveNeverOverwrites: a ref is written once; a second Save of it fails and leaves the first.
func TestSaveNeverOverwrites(t *testing.T) {
	ctx, b, ws, m := saved(t)
	m2 := clone(t, m)
	m2.Route = "/changed"
	m2.InputDigest = inputDigest(t, m2)
	if err := snapshot.Save(ctx, b, m2); err == nil {
		t.Fatal("a second Save of the ref succeeded")
	}
	got, err := snapshot.Load(ctx, b, ws, m.Ref)
	if err != nil || got.Route != "/intro" || got.InputDigest != m.InputDigest {
		t.Fatalf("after the refused overwrite: %+v %v", got, err)
	}
}

// TestLoadRefused: a ref that is missing, malformed or another workspace's is ErrNotFound; a
// manifest that is too large, unreadable or fails Check is an error, never a manifest.
func TestLoadRefused(t *testing.T) {
	ctx := context.Background()
	b := bucket(t)
	ws, otherWS := ids.New(ids.Workspace), ids.New(ids.Workspace)
	saved := manifest(t, ws)
	if err := snapshot.Save(ctx, b, saved); err != nil {
		t.Fatal(err)
	}
	put := func(t *testing.T, ref string, data []byte) {
		t.Helper()
		if err := b.WriteAll(ctx, snapshot.ManifestKey(ws, ref), data, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name     string
		ws, ref  string
		notFound bool
	}{
		{"a ref never saved", ws, ids.New(ids.Snapshot), true},
		{"a malformed ref", ws, "snap_../../" + saved.Ref, true},
		{"an empty ref", ws, "", true},
		{"a ref of another prefix", ws, ids.New(ids.Preview), true},
		{"another workspace's ref", otherWS, saved.Ref, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := snapshot.Load(ctx, b, c.ws, c.ref)
			if !errors.Is(err, snapshot.ErrNotFound) || m != nil {
				t.Fatalf("want ErrNotFound, got %v %v", m, err)
			}
		})
	}

	// Padded with white space, a manifest of exactly the limit loads and one byte more is refused.
	pad := func(t *testing.T, m *snapshot.Manifest, size int) []byte {
		t.Helper()
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(data, bytes.Repeat([]byte(" "), size-len(data))...)
	}
	atLimit := manifest(t, ws)
	put(t, atLimit.Ref, pad(t, atLimit, snapshot.MaxManifestBytes))
	if _, err := snapshot.Load(ctx, b, ws, atLimit.Ref); err != nil {
		t.Fatalf("a manifest of exactly %d bytes: %v", snapshot.MaxManifestBytes, err)
	}

	for _, c := range []struct {
		name string
		data func(m *snapshot.Manifest) []byte
	}{
		{"one byte over the limit", func(m *snapshot.Manifest) []byte { return pad(t, m, snapshot.MaxManifestBytes+1) }},
		{"not JSON", func(*snapshot.Manifest) []byte { return []byte("<html>") }},
		{"truncated JSON", func(m *snapshot.Manifest) []byte { d, _ := json.Marshal(m); return d[:len(d)/2] }},
		{"another workspace's manifest under this key", func(m *snapshot.Manifest) []byte {
			o := manifest(t, otherWS)
			o.Ref = m.Ref
			d, _ := json.Marshal(o)
			return d
		}},
		{"content not matching its digest", func(m *snapshot.Manifest) []byte {
			m.Module.Digest = digest.Bytes([]byte("swapped"))
			d, _ := json.Marshal(m)
			return d
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := manifest(t, ws)
			put(t, m.Ref, c.data(m))
			got, err := snapshot.Load(ctx, b, ws, m.Ref)
			if err == nil || got != nil || errors.Is(err, snapshot.ErrNotFound) {
				t.Fatalf("want an error other than ErrNotFound, got %v %v", got, err)
			}
		})
	}
}

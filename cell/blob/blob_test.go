package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"slidecells/cell/auth"
	"slidecells/cell/auth/authtest"
	"slidecells/shared/problem"
)

// workspaceScope is a real workspace scope, authorized as a request's is.
func workspaceScope(t *testing.T) auth.Scope {
	t.Helper()
	return authtest.New(t, 1).Scopes[0]
}

func newStore(t *testing.T) *Store {
	t.Helper()
	b, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &Store{Bucket: b}
}

func keys(t *testing.T, b *gcblob.Bucket) []string {
	t.Helper()
	out, err := Keys(t.Context(), b, "")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pngBytes(t *testing.T, w, h int, c uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = c
	}
	img.Set(0, 0, color.RGBA{R: 1, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func codeOf(err error) problem.Code { return problem.As(err).Code }

func TestPutStoresContentAddressed(t *testing.T) {
	s, sc := newStore(t), workspaceScope(t)
	ctx := context.Background()
	data := pngBytes(t, 3, 2, 9)
	obj, err := s.Put(ctx, sc, bytes.NewReader(data), PutOptions{Declared: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if obj.SHA256 != hex.EncodeToString(sum[:]) || obj.Size != int64(len(data)) || obj.ContentType != TypePNG || !obj.Created {
		t.Fatalf("object %+v", obj)
	}
	if obj.Key != "ws/"+sc.WorkspaceID()+"/sha256/"+obj.SHA256 {
		t.Fatalf("key %q", obj.Key)
	}
	got, err := s.Bucket.ReadAll(ctx, obj.Key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored bytes differ: %v", err)
	}
	// The same bytes again: the final key exists and is left alone.
	again, err := s.Put(ctx, sc, bytes.NewReader(data), PutOptions{})
	if err != nil || again.Created || again.Key != obj.Key {
		t.Fatalf("second put %+v %v", again, err)
	}
	if k := keys(t, s.Bucket); len(k) != 1 || k[0] != obj.Key {
		t.Fatalf("keys %v", k)
	}
}

func TestPutLimitWhileReading(t *testing.T) {
	s, sc := newStore(t), workspaceScope(t)
	ctx := context.Background()
	head := []byte("%PDF-1.7\n") // a PNG may not carry padding after its end (verifyRaster)
	const limit = 4096
	exact := append(append([]byte{}, head...), make([]byte, limit-len(head))...)
	if _, err := s.Put(ctx, sc, bytes.NewReader(exact), PutOptions{MaxBytes: limit}); err != nil {
		t.Fatalf("exactly the limit: %v", err)
	}
	s2 := newStore(t)
	over := append(exact, 0)
	// A reader that would go on forever shows the limit is enforced while reading.
	endless := io.MultiReader(bytes.NewReader(over), zeros{})
	for _, r := range []io.Reader{bytes.NewReader(over), endless} {
		_, err := s2.Put(ctx, sc, r, PutOptions{MaxBytes: limit})
		if codeOf(err) != problem.PayloadTooLarge {
			t.Fatalf("over the limit: %v", err)
		}
	}
	if k := keys(t, s2.Bucket); len(k) != 0 {
		t.Fatalf("an oversized upload left %v", k)
	}
	if MaxBytes != 25<<20 {
		t.Fatalf("MaxBytes %d: update docs/assets.md", MaxBytes)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

type failing struct{ after int }

func (f *failing) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), f.after)
	copy(p, bytes.Repeat([]byte{0x89}, n))
	f.after -= n
	return n, nil
}

func TestPutRejectsBeforeWriting(t *testing.T) {
	ctx := context.Background()
	sc := workspaceScope(t)
	png := pngBytes(t, 2, 2, 1)
	cases := []struct {
		name     string
		body     io.Reader
		opts     PutOptions
		code     problem.Code
		field    string
		contains string
	}{
		{"text declared png", strings.NewReader("just some text"), PutOptions{Declared: "image/png"}, problem.UnsupportedMediaType, "body", "text/plain"},
		{"exe", bytes.NewReader(append([]byte("MZ\x90\x00\x03\x00\x00\x00"), make([]byte, 100)...)), PutOptions{}, problem.UnsupportedMediaType, "body", "not accepted"},
		{"html", strings.NewReader("<html><script>alert(1)</script></html>"), PutOptions{Declared: "text/html"}, problem.UnsupportedMediaType, "body", "text/html"},
		{"png declared jpeg", bytes.NewReader(png), PutOptions{Declared: "image/jpeg"}, problem.UnsupportedMediaType, "header.Content-Type", "declared image/jpeg"},
		{"png declared exe type", bytes.NewReader(png), PutOptions{Declared: "application/x-msdownload"}, problem.UnsupportedMediaType, "header.Content-Type", "not accepted"},
		{"png where fonts only", bytes.NewReader(png), PutOptions{Kinds: []Kind{KindFont}}, problem.UnsupportedMediaType, "body", "font/woff2"},
		{"empty", strings.NewReader(""), PutOptions{}, problem.ValidationFailed, "body", "empty"},
		{"svg with script", strings.NewReader(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), PutOptions{}, problem.UnsupportedMediaType, "body", "script"},
		{"svg with handler", strings.NewReader(`<svg xmlns="http://www.w3.org/2000/svg"><rect onclick="x()"/></svg>`), PutOptions{}, problem.UnsupportedMediaType, "body", "onclick"},
		{"svg with js link", strings.NewReader(`<svg xmlns="http://www.w3.org/2000/svg"><a href=" java script:x"><text>x</text></a></svg>`), PutOptions{}, problem.UnsupportedMediaType, "body", "javascript"},
		{"svg foreignObject", strings.NewReader(`<?xml version="1.0"?><!-- c --><svg><foreignObject/></svg>`), PutOptions{}, problem.UnsupportedMediaType, "body", "foreignObject"},
		{"broken svg", strings.NewReader(`<svg xmlns="http://www.w3.org/2000/svg"><g></svg>`), PutOptions{}, problem.UnsupportedMediaType, "body", "well-formed"},
		{"body read error", io.MultiReader(bytes.NewReader(png[:8]), &failing{after: 5000}), PutOptions{}, problem.BadRequest, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Put(ctx, sc, c.body, c.opts)
			pe := problem.As(err)
			if pe.Code != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
			if c.field != "" && (len(pe.Fields) != 1 || pe.Fields[0].Field != c.field || !strings.Contains(pe.Fields[0].Message, c.contains)) {
				t.Fatalf("fields %+v", pe.Fields)
			}
			if k := keys(t, s.Bucket); len(k) != 0 {
				t.Fatalf("a rejected upload left %v", k)
			}
		})
	}
}

func TestSniffAndCompatible(t *testing.T) {
	webp := append([]byte("RIFF\x00\x00\x00\x00WEBPVP8L"), make([]byte, 20)...)
	for head, want := range map[string]string{
		"wOF2\x00\x01":                  TypeWOFF2,
		"wOFF\x00\x01":                  TypeWOFF,
		"\x00\x01\x00\x00\x00\x10":      TypeTTF,
		"true\x00\x10":                  TypeTTF,
		"OTTO\x00\x10":                  TypeOTF,
		"\x00\x00\x00\x1cftypavif\x00":  TypeAVIF,
		"%PDF-1.7\n":                    TypePDF,
		"GIF89a\x01\x00":                TypeGIF,
		"\xff\xd8\xff\xe0":              TypeJPEG,
		string(webp):                    TypeWebP,
		"<svg width='1'/>":              TypeSVG,
		"\xef\xbb\xbf <?xml v?>\n<svg>": TypeSVG,
		"<!DOCTYPE svg PUBLIC 'x'><svg xmlns='http://www.w3.org/2000/svg'>": TypeSVG,
		"<!-- drawn by hand --><svg>":                                       TypeSVG,
		"<svgx>":                                                            "text/plain",
		"<!DOCTYPE svg [<!ENTITY a 'b'>]><svg>":                             "text/plain",
		"<html><svg></svg></html>":                                          "text/html",
		"hello":                                                             "text/plain",
	} {
		if got := Sniff([]byte(head)); got != want {
			t.Errorf("Sniff(%q) = %q, want %q", head, got, want)
		}
	}
	for _, c := range []struct {
		declared, sniffed string
		ok                bool
	}{
		{"", TypePNG, true}, {"application/octet-stream", TypePNG, true}, {"IMAGE/PNG; q=1", TypePNG, true},
		{"image/jpg", TypeJPEG, true}, {"font/otf", TypeTTF, true}, {"font/ttf", TypeOTF, true},
		{"application/font-woff", TypeWOFF, true}, {"image/png", TypeJPEG, false}, {"font/woff", TypeWOFF2, false},
	} {
		if got := Compatible(c.declared, c.sniffed); got != c.ok {
			t.Errorf("Compatible(%q, %q) = %v", c.declared, c.sniffed, got)
		}
	}
}

func TestPutConcurrentSameContent(t *testing.T) {
	s, sc := newStore(t), workspaceScope(t)
	data := pngBytes(t, 64, 64, 3)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Put(context.Background(), sc, bytes.NewReader(data), PutOptions{})
			errs <- err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the concurrent puts did not finish within a minute")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if k := keys(t, s.Bucket); len(k) != 1 {
		t.Fatalf("keys %v", k)
	}
}

func TestOpenStaysInWorkspace(t *testing.T) {
	s := newStore(t)
	a, b := workspaceScope(t), workspaceScope(t)
	obj, err := s.Put(context.Background(), a, bytes.NewReader(pngBytes(t, 1, 1, 1)), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(context.Background(), b, obj.Key); codeOf(err) != problem.Internal {
		t.Fatalf("foreign key opened: %v", err)
	}
	rd, err := s.Open(context.Background(), a, obj.Key)
	if err != nil {
		t.Fatal(err)
	}
	_ = rd.Close()
}

func TestSweepTemp(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, k := range []string{TempPrefix + "ws_x/up_1", TempPrefix + "ws_y/up_2", "ws/ws_x/sha256/abc"} {
		if err := s.Bucket.WriteAll(ctx, k, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.SweepTemp(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("young temp blobs swept: %d %v", n, err)
	}
	if n, err := s.SweepTemp(ctx, time.Now().Add(time.Minute)); err != nil || n != 2 {
		t.Fatalf("swept %d %v", n, err)
	}
	if k := keys(t, s.Bucket); len(k) != 1 || k[0] != "ws/ws_x/sha256/abc" {
		t.Fatalf("keys %v", k)
	}
}

func TestDimensions(t *testing.T) {
	vp8l := []byte("RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f")
	b := uint32(99) | uint32(49)<<14 // 100 x 50
	vp8l = append(vp8l, byte(b), byte(b>>8), byte(b>>16), byte(b>>24), 0, 0, 0, 0, 0)
	for _, c := range []struct {
		ct   string
		data []byte
		w, h int
		ok   bool
	}{
		{TypePNG, pngBytes(t, 7, 5, 0), 7, 5, true},
		{TypeWebP, vp8l, 100, 50, true},
		{TypeSVG, []byte(`<svg width="120px" height="80"/>`), 120, 80, true},
		{TypeSVG, []byte(`<svg viewBox="0 0 300.4 150"/>`), 300, 150, true},
		{TypeSVG, []byte(`<svg width="50%"/>`), 0, 0, false},
		{TypeWOFF2, []byte("wOF2"), 0, 0, false},
	} {
		w, h, ok := Dimensions(bytes.NewReader(c.data), c.ct)
		if w != c.w || h != c.h || ok != c.ok {
			t.Errorf("%s: %d×%d %v", c.ct, w, h, ok)
		}
	}
}

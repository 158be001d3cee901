package blob

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"

	"slidecells/shared/problem"
	"slidecells/shared/testenv"
)

func goodPNG(t *testing.T, w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImageUploadsAreVerified: an image over the side or pixel limits is refused from its
// header; a truncated PNG, a PNG with another file appended (a polyglot) are refused; a good
// PNG is stored; nothing refused is left in the bucket.
func TestImageUploadsAreVerified(t *testing.T) {
	s, sc := newStore(t), workspaceScope(t)
	ctx := context.Background()
	good := goodPNG(t, 64, 48)
	elf := append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...)
	for name, c := range map[string]struct {
		body []byte
		msg  string
	}{
		"30000×30000 bomb":  {testenv.BombPNG(30000, 30000), "at most 16384 on a side"},
		"16000×16000 bomb":  {testenv.BombPNG(16000, 16000), "pixels in all"},
		"truncated":         {good[:len(good)-20], "does not decode"},
		"PNG+ELF polyglot":  {append(append([]byte{}, good...), elf...), "data follows the end"},
		"PNG+trailing zero": {append(append([]byte{}, good...), 0), "data follows the end"},
	} {
		_, err := s.Put(ctx, sc, bytes.NewReader(c.body), PutOptions{})
		pe := problem.As(err)
		if pe.Code != problem.ValidationFailed || len(pe.Fields) != 1 || !strings.Contains(pe.Fields[0].Message, c.msg) {
			t.Errorf("%s: %v %+v", name, err, pe.Fields)
		}
	}
	if k := keys(t, s.Bucket); len(k) != 0 {
		t.Fatalf("refused uploads left %v", k)
	}
	if _, err := s.Put(ctx, sc, bytes.NewReader(good), PutOptions{}); err != nil {
		t.Fatalf("a good PNG: %v", err)
	}
}

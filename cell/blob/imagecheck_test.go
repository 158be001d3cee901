package blob

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"strings"
	"testing"

	"slidecells/shared/problem"
)

// bombPNG is a valid PNG header (signature and IHDR) declaring w×h pixels, then one empty IDAT
// and IEND: tiny, and a decompression bomb if anyone decoded it.
func bombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		c := crc32.NewIEEE()
		b.WriteString(typ)
		c.Write([]byte(typ))
		b.Write(data)
		c.Write(data)
		_ = binary.Write(&b, binary.BigEndian, c.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	chunk("IEND", nil)
	return b.Bytes()
}

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
		"30000×30000 bomb":  {bombPNG(30000, 30000), "at most 16384 on a side"},
		"16000×16000 bomb":  {bombPNG(16000, 16000), "pixels in all"},
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

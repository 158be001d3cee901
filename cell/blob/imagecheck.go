package blob

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"

	"slidecells/shared/problem"
)

// Image limits, checked on every image upload and replacement before it is accepted.
const (
	// MaxImageSide is the largest width or height of an image, in pixels.
	MaxImageSide = 16384
	// MaxImagePixels is the largest width × height of an image (32 MiP, 33,554,432 pixels):
	// a small file may declare a huge canvas (a 109 KB PNG of 30000×30000), so the header is
	// checked before anything is decoded.
	MaxImagePixels = 32 << 20
)

// decodeSlots bounds the full decodes that verify raster uploads running at once in this
// process (each holds up to MaxImagePixels × 8 bytes).
var decodeSlots = make(chan struct{}, 2)

// checkImageHeader refuses, from the first bytes, an image whose declared size is over the
// limits. Types whose size the header does not tell pass here.
func checkImageHeader(ct string, head []byte) error {
	w, h, ok := Dimensions(bytes.NewReader(head), ct)
	if !ok {
		return nil
	}
	return checkSize(w, h)
}

func checkSize(w, h int) error {
	switch {
	case w > MaxImageSide || h > MaxImageSide:
		return problem.Invalid(problem.FieldError{Field: "body", Message: fmt.Sprintf("the image is %d×%d pixels; at most %d on a side", w, h, MaxImageSide)})
	case int64(w)*int64(h) > MaxImagePixels:
		return problem.Invalid(problem.FieldError{Field: "body", Message: fmt.Sprintf("the image is %d×%d pixels; at most %d pixels in all", w, h, MaxImagePixels)})
	}
	return nil
}

// verifyRaster decodes a whole PNG or JPEG (r reads it from its start): its declared size must
// be within the limits, every pixel must decode (a truncated file fails), and nothing may follow
// the image's end (a polyglot: an image with another file appended). GIF, WebP and SVG are
// checked by their header's size only.
func verifyRaster(ctx context.Context, ct string, r io.Reader) error {
	switch ct {
	case TypePNG, TypeJPEG:
	default:
		return nil
	}
	br := bufio.NewReaderSize(r, 64<<10)
	cfg, _, err := image.DecodeConfig(br)
	if err != nil {
		return problem.Invalid(problem.FieldError{Field: "body", Message: "the image header cannot be read"})
	}
	if err := checkSize(cfg.Width, cfg.Height); err != nil {
		return err
	}
	select {
	case decodeSlots <- struct{}{}:
		defer func() { <-decodeSlots }()
	case <-ctx.Done():
		return problem.Wrap(ctx.Err(), "the upload was abandoned")
	}
	// DecodeConfig consumed the header: decode from the start again.
	if s, ok := r.(io.Seeker); ok {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return problem.Wrap(err, "the content could not be read")
		}
	} else {
		return problem.Wrap(errors.New("blob: verifyRaster needs a seekable reader"), "internal error")
	}
	br.Reset(r)
	if _, _, err := image.Decode(br); err != nil {
		return problem.Invalid(problem.FieldError{Field: "body", Message: "the image does not decode (truncated or corrupt)"})
	}
	if _, err := br.Peek(1); !errors.Is(err, io.EOF) {
		return problem.Invalid(problem.FieldError{Field: "body", Message: "data follows the end of the image"})
	}
	return nil
}

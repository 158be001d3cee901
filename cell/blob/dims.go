package blob

import (
	"bufio"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"image"
	_ "image/gif"  // DecodeConfig for GIF
	_ "image/jpeg" // DecodeConfig for JPEG
	_ "image/png"  // DecodeConfig for PNG
	"io"
	"math"
	"strconv"
	"strings"
)

// Dimensions reads the pixel size of an image from the start of its content: PNG, JPEG and GIF
// through image.DecodeConfig, WebP from its VP8/VP8L/VP8X header, SVG from the root element's
// width and height (or its viewBox). ok is false for other types (AVIF, fonts, PDF) and for
// content whose header cannot be read; it never decodes the pixels.
func Dimensions(r io.Reader, contentType string) (width, height int, ok bool) {
	switch contentType {
	case TypePNG, TypeJPEG, TypeGIF:
		cfg, _, err := image.DecodeConfig(bufio.NewReader(r))
		if err != nil {
			return 0, 0, false
		}
		return cfg.Width, cfg.Height, true
	case TypeWebP:
		return webpSize(r)
	case TypeSVG:
		return svgSize(r)
	}
	return 0, 0, false
}

func webpSize(r io.Reader) (int, int, bool) {
	var h [30]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, 0, false
	}
	if string(h[0:4]) != "RIFF" || string(h[8:12]) != "WEBP" {
		return 0, 0, false
	}
	le24 := func(b []byte) int { return int(b[0]) | int(b[1])<<8 | int(b[2])<<16 }
	switch string(h[12:16]) {
	case "VP8X": // extended: canvas size minus one, 24 bits each
		return 1 + le24(h[24:27]), 1 + le24(h[27:30]), true
	case "VP8 ": // lossy: frame tag (3), start code 9d 01 2a, then 14-bit width and height
		if h[23] != 0x9d || h[24] != 0x01 || h[25] != 0x2a {
			return 0, 0, false
		}
		return int(binary.LittleEndian.Uint16(h[26:28]) & 0x3fff), int(binary.LittleEndian.Uint16(h[28:30]) & 0x3fff), true
	case "VP8L": // lossless: signature 0x2f, then 14 bits width-1, 14 bits height-1
		if h[20] != 0x2f {
			return 0, 0, false
		}
		b := binary.LittleEndian.Uint32(h[21:25])
		return int(b&0x3fff) + 1, int(b>>14&0x3fff) + 1, true
	}
	return 0, 0, false
}

func svgSize(r io.Reader) (int, int, bool) {
	d := xml.NewDecoder(io.LimitReader(r, 64<<10))
	for {
		tok, err := d.Token()
		if err != nil {
			return 0, 0, false
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		var w, h, vb string
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "width":
				w = a.Value
			case "height":
				h = a.Value
			case "viewBox":
				vb = a.Value
			}
		}
		if wv, err1 := svgLength(w); err1 == nil {
			if hv, err2 := svgLength(h); err2 == nil {
				return wv, hv, true
			}
		}
		f := strings.FieldsFunc(vb, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
		if len(f) == 4 {
			wv, err1 := strconv.ParseFloat(f[2], 64)
			hv, err2 := strconv.ParseFloat(f[3], 64)
			if err1 == nil && err2 == nil && wv > 0 && hv > 0 && wv < math.MaxInt32 && hv < math.MaxInt32 {
				return int(math.Round(wv)), int(math.Round(hv)), true
			}
		}
		return 0, 0, false
	}
}

// svgLength parses a user-unit or px length ("120", "120px", "120.5"); relative units fail.
func svgLength(s string) (int, error) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "px")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if v <= 0 || v >= math.MaxInt32 {
		return 0, errors.New("out of range")
	}
	return int(math.Round(v)), nil
}

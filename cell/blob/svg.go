package blob

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// errSVGStopped ends an upload early: the SVG checker has reached a verdict before the end.
var errSVGStopped = errors.New("blob: svg check stopped")

// svgCheck parses an SVG upload as it streams by (an io.Writer in Put's tee) and rejects
// documents that are not well-formed XML with an <svg> root or that carry active content:
// script, foreignObject and other embedding elements, on* event attributes, and
// javascript:/vbscript:/data:text/html references. Assets are served with a sandboxing
// Content-Security-Policy as well; this check keeps such documents out of the store entirely,
// because pages may inline an asset's markup.
type svgCheck struct {
	pw   *io.PipeWriter
	done chan error
	err  error
	over bool
}

func newSVGCheck() *svgCheck {
	pr, pw := io.Pipe()
	c := &svgCheck{pw: pw, done: make(chan error, 1)}
	go func() {
		err := checkSVG(pr)
		// Unblock and fail any further Write: the verdict is in.
		_ = pr.CloseWithError(errSVGStopped)
		c.done <- err
	}()
	return c
}

func (c *svgCheck) Write(p []byte) (int, error) {
	if _, err := c.pw.Write(p); err != nil {
		return 0, errSVGStopped
	}
	return len(p), nil
}

// finish ends the input and returns the verdict: nil, or a 415 naming what was found.
func (c *svgCheck) finish() error {
	if !c.over {
		_ = c.pw.Close()
		c.err = <-c.done
		c.over = true
	}
	return c.err
}

// abort stops the checker without a verdict (the upload failed for another reason).
func (c *svgCheck) abort() {
	if !c.over {
		_ = c.pw.CloseWithError(errSVGStopped)
		c.err = <-c.done
		c.over = true
	}
}

var svgForbiddenElements = map[string]bool{
	"script": true, "foreignobject": true, "iframe": true, "embed": true, "object": true,
	"handler": true, "listener": true,
}

func checkSVG(r io.Reader) error {
	d := xml.NewDecoder(r)
	d.Strict = true
	root := true
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			if root {
				return unsupported("body", "the SVG document has no root element")
			}
			return nil
		}
		if errors.Is(err, errSVGStopped) {
			return nil // aborted by the caller
		}
		if err != nil {
			return unsupported("body", "the SVG document is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		name := strings.ToLower(se.Name.Local)
		if root {
			if name != "svg" {
				return unsupported("body", "the document's root element is <%s>, not <svg>", se.Name.Local)
			}
			root = false
		}
		if svgForbiddenElements[name] {
			return unsupported("body", "SVG with active content is not accepted (<%s> element)", se.Name.Local)
		}
		for _, a := range se.Attr {
			if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
				return unsupported("body", "SVG with active content is not accepted (%s attribute)", a.Name.Local)
			}
			v := strings.ToLower(strings.Join(strings.Fields(a.Value), ""))
			for _, bad := range []string{"javascript:", "vbscript:", "data:text/html"} {
				if strings.Contains(v, bad) {
					return unsupported("body", "SVG with active content is not accepted (%s reference)", strings.TrimSuffix(bad, ":"))
				}
			}
		}
	}
}

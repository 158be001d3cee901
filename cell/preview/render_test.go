package preview

import (
	"image/color"
	"slices"
	"sort"
	"strings"
	"testing"

	"slidecells/cell/catalog"
	"slidecells/cell/snapshot"
	rc "slidecells/shared/rendercontract"
)

func (e *env) docURL(m *snapshot.Manifest) string { return e.host.URL + "/snapshots/" + m.Ref }

const fontStyles = `@font-face { font-family: "Snapshot Sans"; src: url({{font:0}}) format("truetype"); }
:root { --font-body: "Snapshot Sans", sans-serif; --font-heading: "Snapshot Sans", sans-serif; --color-primary: #1f6feb; }`

// A real compiled tsx page with kit imports, an asset and a web font, served by the host from
// a real blob store through the backend interface, becomes ready in Chromium with the font
// loaded, the image loaded and the snapshot's identity; the token went to the document only.
func TestPageBecomesReady(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{
		Source: `import { Slide, Stack, Columns } from "@kit/layout";
import { Title, Body } from "@kit/text";
import { Image, Figure } from "@kit/media";
import { BarChart } from "@kit/chart";
import { useResource } from "@kit/ready";
import { useEffect } from "react";

export default function Page() {
  const data = useResource("numbers");
  useEffect(() => { const t = setTimeout(() => data.loaded(), 30); return () => clearTimeout(t); }, []);
  return (
    <Slide>
      <Stack gap={12}>
        <Title>Quarterly results</Title>
        <Columns>
          <Body>Revenue grew in every region.</Body>
          <Image asset="ast_logo" width={40} height={40} />
        </Columns>
        <BarChart data={[{ label: "Q1", value: 3 }, { label: "Q2", value: 5 }]} width={200} height={100} />
      </Stack>
    </Slide>
  );
}`,
		Styles: fontStyles,
		Fonts:  []blobSpec{{Data: testFont(t), Type: "font/ttf", Write: true}},
		Assets: []blobSpec{{ID: "ast_logo", Data: pngOf(t, 8, 8, color.RGBA{200, 0, 0, 255}), Type: "image/png", Write: true}},
	})
	tb := open(t, e.docURL(m), e.token(m, nil), 640, 360)
	st := tb.wait("ready", settled)
	if st.Protocol != rc.ReadinessProtocol || st.ArtifactID != m.Ref || st.InputDigest != m.InputDigest || st.HostBuild != HostBuild {
		t.Fatalf("identity: %+v", st)
	}
	if st.Init != rc.InitOK || st.InitError != nil || st.Mount != rc.MountMounted || len(st.ContentFaults) != 0 {
		t.Fatalf("state: %+v", st)
	}
	r := st.Resources
	if r.Fonts != (rc.ResourceCounts{Loaded: 1}) || r.Images != (rc.ResourceCounts{Loaded: 1}) || r.Other != (rc.ResourceCounts{Loaded: 1}) || len(r.Failures) != 0 {
		t.Fatalf("resources: %+v", r)
	}
	if !slices.Equal(st.Scenes, []string{"default"}) || st.Scene != "default" {
		t.Fatalf("scenes: %v %q", st.Scenes, st.Scene)
	}
	var page struct {
		Fonts     string  `json:"fonts"`
		Title     string  `json:"title"`
		TitleFont string  `json:"titleFont"`
		ImgWidth  int     `json:"imgWidth"`
		RootW     float64 `json:"rootW"`
		RootH     float64 `json:"rootH"`
		Bars      int     `json:"bars"`
		Readable  bool    `json:"readable"`
	}
	tb.isolated(`(async () => {
		const root = document.getElementById("preview-root"), r = root.getBoundingClientRect();
		const h1 = root.querySelector("h1");
		return {fonts: document.fonts.status, title: h1.textContent, titleFont: getComputedStyle(h1).fontFamily,
			imgWidth: root.querySelector("img[data-asset-id=ast_logo]").naturalWidth, rootW: r.width, rootH: r.height,
			bars: root.querySelectorAll("svg rect").length, readable: window.__renderReady !== undefined};
	})()`, &page)
	if page.Fonts != "loaded" || page.Title != "Quarterly results" || !strings.Contains(page.TitleFont, "Snapshot Sans") ||
		page.ImgWidth != 8 || page.RootW != 640 || page.RootH != 360 || page.Bars != 2 {
		t.Fatalf("page: %+v", page)
	}
	// With the binding present nothing is published on window (isolated worlds see the DOM only,
	// so read the main world through the DOM-free channel: the debugging copy must be absent).
	var mainWorld struct {
		Ready   string `json:"ready"`
		Binding string `json:"binding"`
	}
	evalMain(t, tb, `({ready: typeof window.__renderReady, binding: typeof window.__renderReadyV1})`, &mainWorld)
	if mainWorld.Ready != "undefined" || mainWorld.Binding != "undefined" {
		t.Fatalf("main world: %+v", mainWorld)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for u, with := range tb.docHeader {
		if with != (u == e.docURL(m)) {
			t.Errorf("%s: token attached %v", u, with)
		}
	}
	if len(tb.docHeader) < 5 {
		t.Errorf("requests seen: %v", tb.docHeader)
	}
	// The document's preloads (the runtime's modules, the snapshot's module, its font) are the
	// loads the page makes: each URL was requested once, not preloaded and then fetched again.
	font := e.docURL(m) + "/blobs/" + m.Fonts[0].Hex()
	if tb.fetched[font] != 1 || tb.fetched[e.docURL(m)+"/module.js"] != 1 {
		t.Errorf("font requested %d times, module %d times; requests %v", tb.fetched[font], tb.fetched[e.docURL(m)+"/module.js"], tb.fetched)
	}
	for u, n := range tb.fetched {
		if n != 1 {
			t.Errorf("%s requested %d times", u, n)
		}
	}
}

// The kit modules export exactly what the catalogue lists, and "react" has every export of
// React's own module.
func TestKitExportsMatchCatalog(t *testing.T) {
	e := newEnv(t)
	var items []string
	for _, k := range catalog.RuntimeKit {
		items = append(items, k.Name)
	}
	if !slices.Equal(items, KitItems()) {
		t.Fatalf("catalog kit %v, runtime kit %v", items, KitItems())
	}
	m := e.snapshot(snap{Source: `import * as React from "react";
import * as layout from "@kit/layout";
import * as text from "@kit/text";
import * as media from "@kit/media";
import * as chart from "@kit/chart";
import * as ready from "@kit/ready";
const kits = { layout, text, media, chart, ready };
export default function P() {
  const out = {};
  for (const k in kits) out[k] = Object.keys(kits[k]).sort();
  out.reactMissing = Object.keys(React.default).filter((k) => !(k in React));
  return <pre id="exports">{JSON.stringify(out)}</pre>;
}`})
	tb := open(t, e.docURL(m), e.token(m, nil), 640, 360)
	tb.wait("mounted", settled)
	var raw string
	tb.isolated(`document.getElementById("exports").textContent`, &raw)
	var got map[string][]string
	if err := jsonUnmarshal(raw, &got); err != nil {
		t.Fatal(err, raw)
	}
	for _, k := range catalog.RuntimeKit {
		want := append([]string(nil), k.Exports...)
		sort.Strings(want)
		if !slices.Equal(got[k.Name], want) {
			t.Errorf("@kit/%s exports %v, catalogue says %v", k.Name, got[k.Name], want)
		}
	}
	if len(got["reactMissing"]) != 0 {
		t.Errorf("react lacks %v", got["reactMissing"])
	}
}

// A component with two scenes: the host declares them, switches on request and answers every
// request with a receipt; an undeclared scene is a failed receipt and a blocking content fault.
func TestComponentScenes(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{Kind: snapshot.KindComponent, Source: `import { useSceneReady } from "@kit/ready";
import { useEffect } from "react";
export const scenes = { dense: { items: 12 }, empty: { items: 0, label: "none" } };
export default function List({ items = 3, label = "items" }) {
  const ready = useSceneReady();
  useEffect(() => { const t = setTimeout(ready, 20); return () => clearTimeout(t); }, []);
  return <div id="list">{items} {label}</div>;
}`})
	tb := open(t, e.docURL(m), e.token(m, nil), 400, 300)
	st := tb.wait("default scene", settled)
	if !slices.Equal(st.Scenes, []string{"default", "dense", "empty"}) || st.Scene != "default" || st.Mount != rc.MountMounted || st.Resources.Other.Loaded != 1 {
		t.Fatalf("default: %+v", st)
	}
	text := func() string {
		var s string
		tb.isolated(`document.getElementById("list").textContent`, &s)
		return s
	}
	if got := text(); got != "3 items" {
		t.Fatalf("default scene shows %q", got)
	}

	tb.switchScene("dense", "sw_1")
	st = tb.receipt("sw_1")
	tb.wait("dense ready", func(s *rc.ReadyState) bool { return settled(s) && s.Scene == "dense" })
	if r, _ := st.Receipt("sw_1"); r.State != rc.SceneReady || r.Scene != "dense" || st.Scene != "dense" || st.Mount != rc.MountMounted {
		t.Fatalf("dense: %+v", st)
	}
	if got := text(); got != "12 items" {
		t.Fatalf("dense scene shows %q", got)
	}

	tb.switchScene("missing", "sw_2")
	st = tb.receipt("sw_2")
	r, _ := st.Receipt("sw_2")
	if r.State != rc.SceneFailed || st.Mount != rc.MountFailed || len(st.ContentFaults) != 1 ||
		st.ContentFaults[0].Code != "SCENE_UNKNOWN" || !st.ContentFaults[0].Blocking || st.ContentFaults[0].Scene != "missing" || st.InitError != nil {
		t.Fatalf("undeclared scene: %+v", st)
	}

	tb.switchScene("empty", "sw_3")
	tb.switchScene("empty", "sw_3") // a repeated request ID is answered once
	tb.receipt("sw_3")              // waits until the request is answered
	st = tb.wait("empty ready", func(s *rc.ReadyState) bool { return settled(s) && s.Scene == "empty" })
	if r, _ := st.Receipt("sw_3"); r.State != rc.SceneReady || len(st.ContentFaults) != 0 || st.Mount != rc.MountMounted {
		t.Fatalf("empty: %+v", st)
	}
	if got := text(); got != "0 none" {
		t.Fatalf("empty scene shows %q", got)
	}
	n := 0
	for _, rr := range st.SceneReceipts {
		if rr.RequestID == "sw_3" {
			n++
		}
	}
	if n != 1 || len(st.SceneReceipts) != 3 {
		t.Fatalf("receipts: %+v", st.SceneReceipts)
	}
}

// Content faults are kept apart from host faults: a page that throws while rendering, one that
// throws while its module is evaluated and one without a default export are blocking content
// faults on an initialised host, never init_error.
func TestContentFaults(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, code, message string
		s                   snap
	}{
		{"render throws", "RENDER_THREW", "TypeError: Cannot read", snap{Source: `export default function P(props: any) { return <p>{props.data.items.length}</p>; }`}},
		{"module throws", "MODULE_EVALUATION_FAILED", "Error: top-level boom", snap{Source: `throw new Error("top-level boom");
export default function P() { return <p>never</p>; }`}},
		{"no default export", "DEFAULT_EXPORT_MISSING", "default export", snap{Raw: true, Source: `export const x = 1;`}},
		{"unknown asset", "ASSET_UNKNOWN", "ast_nope", snap{Source: `import { Image } from "@kit/media";
export default function P() { return <Image asset="ast_nope" />; }`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := e.snapshot(c.s)
			tb := open(t, e.docURL(m), e.token(m, nil), 320, 200)
			st := tb.wait("settled", func(s *rc.ReadyState) bool { return settled(s) && len(s.ContentFaults) > 0 })
			if st.Init != rc.InitOK || st.InitError != nil || st.Mount != rc.MountFailed {
				t.Fatalf("state: %+v", st)
			}
			f := st.ContentFaults[0]
			if f.Code != c.code || !f.Blocking || f.Scene != "default" || !strings.Contains(f.Message, c.message) {
				t.Fatalf("fault: %+v", st.ContentFaults)
			}
			// A scene switch on a failed page is answered, and failed.
			tb.switchScene("default", "sw_f")
			if r, _ := tb.receipt("sw_f").Receipt("sw_f"); r.State != rc.SceneFailed {
				t.Fatalf("receipt %+v", r)
			}
		})
	}
}

// Host faults are init_error: a module or styles the store does not have, never a content
// fault.
func TestHostFaults(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name, code string
		s          snap
	}{
		{"module missing", "MODULE_FETCH_FAILED", snap{Source: simplePage().Source, NoModule: true}},
		{"styles missing", "STYLES_FETCH_FAILED", snap{Source: simplePage().Source, NoStyles: true, Styles: ":root { --never-stored: 1 }"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := e.snapshot(c.s)
			tb := open(t, e.docURL(m), e.token(m, nil), 320, 200)
			st := tb.wait("init failed", func(s *rc.ReadyState) bool { return s.Init == rc.InitFailed })
			if st.InitError == nil || st.InitError.Code != c.code || st.InitError.Permanent || len(st.ContentFaults) != 0 || st.ArtifactID != m.Ref {
				t.Fatalf("state: %+v", st)
			}
		})
	}
}

// An html page: the body is inserted into the content root (it cannot close it), its inline
// scripts run (allowed by hash), its images are tracked, and an error it throws is a
// non-blocking content fault.
func TestHTMLPage(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{FileType: "html", Source: `<style>p { color: rgb(1, 2, 3) }</style>
<p id="msg">static</p>
<img id="pic" src="data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==" width="4" height="4">
<script>document.getElementById("msg").textContent = "scripted"; null.boom;</script>
</div></div></body><p id="after">still inside</p>`})
	tb := open(t, e.docURL(m), e.token(m, nil), 320, 200)
	st := tb.wait("mounted", settled)
	if st.Init != rc.InitOK || st.Mount != rc.MountMounted || st.Resources.Images != (rc.ResourceCounts{Loaded: 1}) {
		t.Fatalf("state: %+v", st)
	}
	if len(st.ContentFaults) != 1 || st.ContentFaults[0].Code != "UNCAUGHT_ERROR" || st.ContentFaults[0].Blocking {
		t.Fatalf("faults: %+v", st.ContentFaults)
	}
	var dom struct {
		Msg    string `json:"msg"`
		Inside bool   `json:"inside"`
		Color  string `json:"color"`
	}
	tb.isolated(`({msg: document.getElementById("msg").textContent,
		inside: document.getElementById("preview-root").contains(document.getElementById("after")),
		color: getComputedStyle(document.getElementById("msg")).color})`, &dom)
	if dom.Msg != "scripted" || !dom.Inside || dom.Color != "rgb(1, 2, 3)" {
		t.Fatalf("dom: %+v", dom)
	}
}

// Content that overwrites window.__renderReady, JSON.stringify, JSON.parse, Object.freeze,
// toJSON on Object.prototype and Array.prototype, setters on Object.prototype, and that calls
// the binding from an iframe, cannot change what the channel sends: every trusted payload is
// the host's own.
func TestContentCannotForgeReadiness(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{
		Source: `import { Image } from "@kit/media";
const forged = '{"protocol":"render-ready.v1","artifact_id":"forged","input_digest":"forged","host_build":"forged","init":"ok","init_error":null,"mount":"mounted","resources":{"fonts":{"loaded":0,"failed":0,"pending":0},"images":{"loaded":0,"failed":0,"pending":0},"other":{"loaded":0,"failed":0,"pending":0}},"scenes":["default"],"scene":"default","scene_receipts":[],"content_faults":[]}';
const seen = typeof (window as any).__renderReadyV1;
try { Object.defineProperty(window, "__renderReady", { value: JSON.parse(forged), writable: false, configurable: false }); } catch (e) {}
JSON.stringify = () => forged;
JSON.parse = () => ({ forged: true });
Object.freeze = (o: any) => o;
(Object.prototype as any).toJSON = function () { return "forged"; };
(Array.prototype as any).toJSON = function () { return ["forged"]; };
for (const k of ["init", "mount", "code", "blocking", "loaded", "pending", "n", "items"]) {
  Object.defineProperty(Object.prototype, k, { set() {}, get() { return "forged"; }, configurable: true });
}
const frame = document.createElement("iframe");
document.body.appendChild(frame);
try { (frame.contentWindow as any).__renderReadyV1(forged); } catch (e) {}
try { (window as any).__renderReadyV1(forged); } catch (e) {}
export default function P() {
  return <div><p id="seen">{seen}</p><Image asset="ast_a" width={10} height={10} /></div>;
}`,
		Assets: []blobSpec{{ID: "ast_a", Data: pngOf(t, 3, 3, color.Black), Type: "image/png", Write: true}},
	})
	tb := open(t, e.docURL(m), e.token(m, nil), 320, 200)
	st := tb.wait("settled", settled)
	if st.ArtifactID != m.Ref || st.InputDigest != m.InputDigest || st.HostBuild != HostBuild || st.Init != rc.InitOK ||
		st.Mount != rc.MountMounted || st.Resources.Images != (rc.ResourceCounts{Loaded: 1}) || len(st.ContentFaults) != 0 {
		t.Fatalf("state: %+v", st)
	}
	trusted, untrusted := tb.payloads()
	for _, p := range trusted {
		if strings.Contains(p, "forged") {
			t.Fatalf("a forged payload came through the trusted channel: %s", p)
		}
	}
	var seen string
	tb.isolated(`document.getElementById("seen").textContent`, &seen)
	if seen != "undefined" {
		t.Fatalf("content saw the binding: %q", seen)
	}
	// The iframe's call reached CDP, from a context the renderer ignores.
	if len(untrusted) == 0 {
		t.Fatal("no binding call from the iframe reached CDP: the positive control of the untrusted channel failed, so the test proves nothing about it")
	}
	for _, p := range untrusted {
		if !strings.Contains(p, "forged") {
			t.Fatalf("an untrusted call carried a genuine-looking payload: %s", p)
		}
	}
}

// An ordinary browser (no binding) gets a frozen debugging copy of the state on window.
func TestDebugCopyWithoutBinding(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(simplePage())
	tb := openWith(t, e.docURL(m)+"?access="+e.token(m, nil), "", 320, 200, false)
	var st struct {
		Protocol string `json:"protocol"`
		Artifact string `json:"artifact_id"`
		Mount    string `json:"mount"`
		Frozen   bool   `json:"frozen"`
		Search   string `json:"search"`
	}
	for i := 0; i < 200; i++ {
		evalMain(t, tb, `(() => { const r = window.__renderReady || {}; return {protocol: r.protocol, artifact_id: r.artifact_id, mount: r.mount, frozen: Object.isFrozen(r), search: location.search}; })()`, &st)
		if st.Mount == "mounted" {
			break
		}
		sleep()
	}
	if st.Protocol != rc.ReadinessProtocol || st.Artifact != m.Ref || st.Mount != "mounted" || !st.Frozen || st.Search != "" {
		t.Fatalf("debug copy: %+v", st)
	}
}

// Images that fail are counted as failed resources with their asset ID or file name (never a
// query), not as faults.
func TestImageFailures(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{Source: `import { Image } from "@kit/media";
export default function P() {
  return <div><Image asset="ast_gone" width={10} height={10} /><img src="/nowhere/missing.png?sig=secret" width={5} height={5} /></div>;
}`, Assets: []blobSpec{{ID: "ast_gone", Data: pngOf(t, 2, 2, color.White), Type: "image/png", Write: false}}})
	tb := open(t, e.docURL(m), e.token(m, nil), 320, 200)
	st := tb.wait("settled", settled)
	if st.Init != rc.InitOK || st.Mount != rc.MountMounted || len(st.ContentFaults) != 0 || st.Resources.Images != (rc.ResourceCounts{Failed: 2}) {
		t.Fatalf("state: %+v", st)
	}
	refs := map[string]bool{}
	for _, f := range st.Resources.Failures {
		if f.Kind != "image" {
			t.Fatalf("failure %+v", f)
		}
		refs[f.Ref] = true
	}
	if !refs["ast_gone"] || !refs["missing.png"] || len(refs) != 2 {
		t.Fatalf("failures: %+v", st.Resources.Failures)
	}
}

// Layout analysis of the current scene. Fixed script, embedded in the
// renderer; its digest is part of the RenderProfile. Input: {scene, width,
// height}. Output: JSON string {layout, findings, counts, truncated,
// incomplete}. Findings are counted before any is left out: counts are
// complete; the kept findings are errors first, then warnings, then infos,
// at most MAX_FIND; truncated says some were left out. incomplete says a
// check could not look at everything (more elements than MAX_CHECK): the
// result cannot claim that there is no problem. Graphics (media, SVGs,
// painted boxes) are checked against text (GRAPHIC_OVERLAP) and graphics and
// text blocks against their container (CONTENT_OUTSIDE_CONTAINER), with the
// rectangles as evidence.
(function (opts) {
  "use strict";
  var W = opts.width, H = opts.height;
  var MAX_TEXT = 200, MAX_GROUPS = 100, MAX_REL = 100, MAX_FIND = 300, TEXT_CHARS = 160, MAX_CHECK = 2000;
  var SMALL_TEXT_PX = 12, BLANK_MIN_FRACTION = 0.12;
  var kept = { error: [], warning: [], info: [] }, counts = { error: 0, warning: 0, info: 0 };
  var truncated = false, incomplete = false;

  function round(v) { return Math.round(v * 100) / 100; }
  function rect(r) { return { x: round(r.left), y: round(r.top), width: round(r.width), height: round(r.height) }; }
  function cut(s) { return s.length > TEXT_CHARS ? [s.slice(0, TEXT_CHARS), true] : [s, false]; }
  // add counts every finding and keeps at most MAX_FIND of each severity
  // (the first in DOM order); the output keeps errors first.
  function add(severity, code, message, evidence, cutEvidence) {
    counts[severity]++;
    if (kept[severity].length >= MAX_FIND) { truncated = true; return; }
    kept[severity].push({ severity: severity, code: code, scene: opts.scene, message: message, evidence: evidence, truncated: !!cutEvidence });
  }
  function selector(el) {
    var parts = [], e = el;
    while (e && e.nodeType === 1 && e !== document.documentElement && parts.length < 6) {
      if (e.id) { parts.unshift("#" + CSS.escape(e.id)); break; }
      var p = e.tagName.toLowerCase();
      var tid = e.getAttribute("data-testid");
      if (tid) { p += '[data-testid="' + tid.slice(0, 40) + '"]'; }
      else if (e.parentElement) {
        var same = Array.prototype.filter.call(e.parentElement.children, function (c) { return c.tagName === e.tagName; });
        if (same.length > 1) p += ":nth-of-type(" + (same.indexOf(e) + 1) + ")";
      }
      parts.unshift(p);
      e = e.parentElement;
    }
    return parts.join(" > ");
  }
  function visible(cs) { return cs.display !== "none" && cs.visibility !== "hidden" && cs.visibility !== "collapse" && parseFloat(cs.opacity) > 0; }
  function painted(cs) {
    var bg = cs.backgroundColor;
    return cs.backgroundImage !== "none" || (bg && bg !== "transparent" && !/rgba\([^)]*,\s*0\)$/.test(bg)) ||
      parseFloat(cs.borderTopWidth) > 0 || parseFloat(cs.borderLeftWidth) > 0 || cs.boxShadow !== "none";
  }
  function intersect(a, b) {
    var x = Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left));
    var y = Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
    return x * y;
  }
  function textRect(el) {
    var range = document.createRange(), box = null, tops = {}, lines = 0;
    for (var i = 0; i < el.childNodes.length; i++) {
      var n = el.childNodes[i];
      if (n.nodeType !== 3 || !n.textContent.trim()) continue;
      range.selectNodeContents(n);
      var rs = range.getClientRects();
      for (var j = 0; j < rs.length; j++) {
        var r = rs[j];
        if (r.width <= 0 || r.height <= 0) continue;
        var key = Math.round(r.top);
        if (!tops[key]) { tops[key] = true; lines++; }
        box = box ? { left: Math.min(box.left, r.left), top: Math.min(box.top, r.top), right: Math.max(box.right, r.right), bottom: Math.max(box.bottom, r.bottom) } : { left: r.left, top: r.top, right: r.right, bottom: r.bottom };
      }
    }
    if (box) { box.width = box.right - box.left; box.height = box.bottom - box.top; }
    return { box: box, lines: lines };
  }

  var canvas = { left: 0, top: 0, right: W, bottom: H, width: W, height: H };
  var all = document.body ? document.body.querySelectorAll("*") : [];
  var texts = [], checked = [], boxes = [], graphics = [], layoutTruncated = false;
  for (var i = 0; i < all.length; i++) {
    var el = all[i];
    if (el.tagName === "SCRIPT" || el.tagName === "STYLE" || el.tagName === "NOSCRIPT" || el.tagName === "TEMPLATE") continue;
    var cs = getComputedStyle(el);
    if (!visible(cs)) continue;
    var r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) continue;
    var direct = "";
    for (var k = 0; k < el.childNodes.length; k++) if (el.childNodes[k].nodeType === 3) direct += el.childNodes[k].textContent;
    direct = direct.replace(/\s+/g, " ").trim();
    var replaced = /^(IMG|CANVAS|VIDEO|PICTURE|svg|SVG|OBJECT|EMBED)$/.test(el.tagName);
    var covers = r.width * r.height >= 0.9 * W * H;
    if ((direct || replaced || painted(cs)) && !covers) boxes.push(r);
    // Graphics: media and outermost SVGs, and painted boxes without text of
    // their own (their SVG insides are the SVG's).
    if (!direct && !covers && !el.ownerSVGElement && (replaced || painted(cs))) {
      if (graphics.length < MAX_CHECK) { graphics.push({ el: el, r: r, media: replaced }); } else { incomplete = true; }
    }
    // Content leaving its container: a graphic or a block of text that
    // sticks out of its parent's box while the parent does not clip it (a
    // positioned element placed itself; the canvas edge is OUT_OF_CANVAS).
    if ((direct || replaced) && !el.ownerSVGElement && cs.position !== "absolute" && cs.position !== "fixed" && cs.display.indexOf("inline") !== 0) {
      var par = el.parentElement;
      if (par && par !== document.body && par !== document.documentElement) {
        var pcs = getComputedStyle(par), pr = par.getBoundingClientRect();
        var outX = r.left < pr.left - 2 || r.right > pr.right + 2, outY = r.top < pr.top - 2 || r.bottom > pr.bottom + 2;
        if (((outX && pcs.overflowX === "visible") || (outY && pcs.overflowY === "visible")) && pr.width > 0 && pr.height > 0) {
          var tc = cut(direct);
          add("warning", "CONTENT_OUTSIDE_CONTAINER", "content sticks out of its container", { selector: selector(el), related: selector(par), rect: rect(r), text: tc[0] }, tc[1]);
        }
      }
    }
    if (r.right > W + 0.5 || r.bottom > H + 0.5 || r.left < -0.5 || r.top < -0.5) {
      if (direct || replaced) {
        var t0 = cut(direct);
        add("error", "OUT_OF_CANVAS", "element extends beyond the canvas", { selector: selector(el), rect: rect(r), text: t0[0] }, t0[1]);
      }
    }
    if (!direct) continue;
    var tr = textRect(el);
    var t = cut(direct);
    var clipsX = cs.overflowX !== "visible", clipsY = cs.overflowY !== "visible";
    var overflowX = el.scrollWidth > el.clientWidth + 1, overflowY = el.scrollHeight > el.clientHeight + 1;
    var spills = tr.box && (tr.box.right > r.right + 1 || tr.box.bottom > r.bottom + 1 || tr.box.left < r.left - 1 || tr.box.top < r.top - 1);
    var clipped = (clipsX && overflowX) || (clipsY && overflowY) || (cs.textOverflow === "ellipsis" && overflowX);
    var overflow = !clipped && (spills || (!clipsX && overflowX && el.clientWidth > 0) || (!clipsY && overflowY && el.clientHeight > 0));
    var fontSize = parseFloat(cs.fontSize);
    var sel = selector(el);
    var tb = { el: el, r: r, block: { selector: sel, rect: rect(r), text: t[0], font_size_px: fontSize, lines: tr.lines, overflow: !!overflow, clipped: !!clipped, truncated: t[1] } };
    if (texts.length < MAX_TEXT) { texts.push(tb); } else { layoutTruncated = true; }
    if (checked.length < MAX_CHECK) { checked.push(tb); } else { incomplete = true; }
    if (overflow) add("error", "TEXT_OVERFLOW", "text does not fit its box", { selector: sel, rect: rect(r), text: t[0] }, t[1]);
    if (clipped) add("error", "TEXT_CLIPPED", "text is cut off by its box", { selector: sel, rect: rect(r), text: t[0] }, t[1]);
    if (fontSize < SMALL_TEXT_PX) add("warning", "TEXT_TOO_SMALL", "text is smaller than " + SMALL_TEXT_PX + "px", { selector: sel, rect: rect(r), text: t[0], value: String(fontSize) }, t[1]);
  }

  // Groups: containers with at least two visible element children.
  var groups = [];
  var seen = new Set();
  texts.forEach(function (tb) {
    var p = tb.el.parentElement;
    if (!p || p === document.body || seen.has(p)) return;
    seen.add(p);
    var kids = Array.prototype.filter.call(p.children, function (c) { var rr = c.getBoundingClientRect(); return rr.width > 0 && rr.height > 0; });
    if (kids.length < 2) return;
    if (groups.length >= MAX_GROUPS) { layoutTruncated = true; return; }
    var rs = kids.map(function (c) { return c.getBoundingClientRect(); });
    var sameTop = rs.every(function (x) { return Math.abs(x.top - rs[0].top) < 2; });
    var sameLeft = rs.every(function (x) { return Math.abs(x.left - rs[0].left) < 2; });
    var dir = sameTop ? "row" : sameLeft ? "column" : (getComputedStyle(p).display.indexOf("grid") >= 0 ? "grid" : "free");
    groups.push({ selector: selector(p), rect: rect(p.getBoundingClientRect()), children: kids.length, direction: dir });
  });

  // Spatial relations: overlapping text blocks that are not nested.
  var relations = [];
  for (var a = 0; a < checked.length; a++) {
    for (var b = a + 1; b < checked.length; b++) {
      var A = checked[a], B = checked[b];
      if (A.el.contains(B.el) || B.el.contains(A.el)) continue;
      var area = intersect(A.r, B.r);
      if (area <= 4) continue;
      if (relations.length < MAX_REL) {
        relations.push({ kind: "overlap", a: A.block.selector, b: B.block.selector, area: round(area) });
      } else { layoutTruncated = true; }
      add("warning", "ELEMENT_OVERLAP", "two text blocks overlap", { selector: A.block.selector, related: B.block.selector, rect: rect(A.r) }, false);
    }
  }

  // Graphics against text: a graphic painted over text hides it (error);
  // text over media or a chart it is not part of is a collision (warning);
  // text over a painted box (a card) is what cards are for.
  function topmost(x, y, A, B) {
    var stack = document.elementsFromPoint(x, y);
    for (var i = 0; i < stack.length; i++) {
      if (A.contains(stack[i])) return A;
      if (B.contains(stack[i])) return B;
    }
    return null;
  }
  graphics.forEach(function (G) {
    checked.forEach(function (T) {
      if (G.el.contains(T.el) || T.el.contains(G.el)) return;
      var ir = { left: Math.max(G.r.left, T.r.left), top: Math.max(G.r.top, T.r.top), right: Math.min(G.r.right, T.r.right), bottom: Math.min(G.r.bottom, T.r.bottom) };
      if (ir.right - ir.left <= 2 || ir.bottom - ir.top <= 2) return;
      ir.width = ir.right - ir.left; ir.height = ir.bottom - ir.top;
      var top = topmost((ir.left + ir.right) / 2, (ir.top + ir.bottom) / 2, G.el, T.el);
      var ev = { selector: selector(G.el), related: T.block.selector, rect: rect(ir), text: T.block.text };
      if (top === G.el) add("error", "GRAPHIC_OVERLAP", "a graphic is painted over text", ev, T.block.truncated);
      else if (G.media) add("warning", "GRAPHIC_OVERLAP", "text runs over a graphic", ev, T.block.truncated);
    });
  });

  // Coverage and blank areas on a coarse grid.
  var GX = 32, GY = 18, cw = W / GX, ch = H / GY, grid = [], covered = 0;
  for (var y = 0; y < GY; y++) { grid.push(new Array(GX).fill(false)); }
  boxes.forEach(function (r) {
    var x0 = Math.max(0, Math.floor(r.left / cw)), x1 = Math.min(GX - 1, Math.ceil(r.right / cw) - 1);
    var y0 = Math.max(0, Math.floor(r.top / ch)), y1 = Math.min(GY - 1, Math.ceil(r.bottom / ch) - 1);
    for (var yy = y0; yy <= y1; yy++) for (var xx = x0; xx <= x1; xx++) grid[yy][xx] = true;
  });
  for (var y2 = 0; y2 < GY; y2++) for (var x2 = 0; x2 < GX; x2++) if (grid[y2][x2]) covered++;
  function largestEmpty() {
    var best = null, heights = new Array(GX).fill(0);
    for (var yy = 0; yy < GY; yy++) {
      for (var xx = 0; xx < GX; xx++) heights[xx] = grid[yy][xx] ? 0 : heights[xx] + 1;
      for (var x0 = 0; x0 < GX; x0++) {
        var h = Infinity;
        for (var x1 = x0; x1 < GX && heights[x1] > 0; x1++) {
          h = Math.min(h, heights[x1]);
          var area = (x1 - x0 + 1) * h;
          if (!best || area > best.area) best = { area: area, x: x0, y: yy - h + 1, w: x1 - x0 + 1, h: h };
        }
      }
    }
    return best;
  }
  var blanks = [];
  for (var n = 0; n < 4; n++) {
    var e = largestEmpty();
    if (!e || e.area / (GX * GY) < BLANK_MIN_FRACTION) break;
    for (var yy3 = e.y; yy3 < e.y + e.h; yy3++) for (var xx3 = e.x; xx3 < e.x + e.w; xx3++) grid[yy3][xx3] = true;
    var br = { x: round(e.x * cw), y: round(e.y * ch), width: round(e.w * cw), height: round(e.h * ch) };
    var frac = round(e.area / (GX * GY));
    blanks.push({ rect: br, fraction: frac });
    add("info", "LARGE_BLANK_AREA", "a large part of the canvas is empty", { rect: br, value: String(frac) }, false);
  }
  if (texts.length === 0 && boxes.length === 0) add("warning", "EMPTY_CANVAS", "the canvas shows no content", {}, false);

  return JSON.stringify({
    layout: {
      canvas: { x: 0, y: 0, width: W, height: H },
      text_blocks: texts.map(function (t) { return t.block; }),
      groups: groups, relations: relations, blank_areas: blanks,
      coverage: round(covered / (GX * GY)), truncated: layoutTruncated
    },
    findings: kept.error.concat(kept.warning, kept.info), counts: counts, truncated: truncated, incomplete: incomplete
  });
})

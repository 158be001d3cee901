// The preview runtime's bootstrap: the FIRST script of every preview document (inline, classic,
// with the document's nonce). It implements render-ready.v1 over the renderer's channel
// (/work/briefs/channel.md, shared/rendercontract/doc.go):
//
//   - it takes the CDP binding __renderReadyV1 and deletes it from window before any content
//     exists, so only this closure can send;
//   - it captures every built-in it uses later, so content that overrides globals
//     (JSON.stringify, Object.freeze, Array.prototype, Object.prototype.toJSON, setters on
//     prototypes, RegExp, Promise statics) cannot change what it sends: the payload is written
//     by hand from closure variables, never by walking objects content can reach;
//   - identity (artifact_id, input_digest, host_build, protocol) comes from the document the
//     host wrote, never from content;
//   - host faults (styles, runtime or module fetch, runtime start) go to init_error and can only
//     be raised before content starts; everything after is a content fault.
//
// The host substitutes the configuration object for the placeholder in the last line.
(function (CONFIG) {
  "use strict";
  var send = typeof window.__renderReadyV1 === "function" ? window.__renderReadyV1 : null;
  try { delete window.__renderReadyV1; } catch (e) { /* stays; the renderer trusts the main world only */ }

  // ---- captured built-ins -------------------------------------------------------------
  var FP = Function.prototype;
  var uncurry = FP.bind.bind(FP.call);
  var bindTo = uncurry(FP.bind);
  var O = Object;
  var create = O.create, freeze = O.freeze, objectKeys = O.keys, defineProperty = O.defineProperty;
  var getOwn = O.getOwnPropertyDescriptor;
  var stringify = JSON.stringify, parse = JSON.parse;
  var isFiniteNumber = Number.isFinite;
  var floor = Math.floor;
  var charCodeAt = uncurry(String.prototype.charCodeAt);
  var strSlice = uncurry(String.prototype.slice);
  var lastIndexOf = uncurry(String.prototype.lastIndexOf);
  var indexOf = uncurry(String.prototype.indexOf);
  var toStr = String;
  var PromiseCtor = Promise;
  var then = uncurry(Promise.prototype.then);
  var WS = WeakSet, wsAdd = uncurry(WeakSet.prototype.add), wsHas = uncurry(WeakSet.prototype.has), wsDelete = uncurry(WeakSet.prototype.delete);
  var MO = MutationObserver, moObserve = uncurry(MutationObserver.prototype.observe);
  var addListener = uncurry(EventTarget.prototype.addEventListener);
  function getter(proto, name) {
    for (var p = proto; p; p = O.getPrototypeOf(p)) {
      var d = getOwn(p, name);
      if (d && d.get) return uncurry(d.get);
    }
    return function () { return undefined; };
  }
  function setter(proto, name) {
    for (var p = proto; p; p = O.getPrototypeOf(p)) {
      var d = getOwn(p, name);
      if (d && d.set) return uncurry(d.set);
    }
    return function () { throw new TypeError("no setter " + name); };
  }
  var evTarget = getter(Event.prototype, "target");
  var evDetail = getter(CustomEvent.prototype, "detail");
  var errMessage = getter(ErrorEvent.prototype, "message");
  var errError = getter(ErrorEvent.prototype, "error");
  var rejReason = getter(PromiseRejectionEvent.prototype, "reason");
  var docReadyState = getter(Document.prototype, "readyState");
  var docFonts = getter(Document.prototype, "fonts");
  var getElementById = uncurry(Document.prototype.getElementById);
  var qsa = uncurry(Element.prototype.querySelectorAll);
  var nlLength = getter(NodeList.prototype, "length");
  var nlItem = uncurry(NodeList.prototype.item);
  var localName = getter(Element.prototype, "localName");
  var nsURI = getter(Element.prototype, "namespaceURI");
  var getAttribute = uncurry(Element.prototype.getAttribute);
  var setAttribute = uncurry(Element.prototype.setAttribute);
  var parentNode = getter(Node.prototype, "parentNode");
  var imgComplete = getter(HTMLImageElement.prototype, "complete");
  var imgCurrentSrc = getter(HTMLImageElement.prototype, "currentSrc");
  var linkSheet = getter(HTMLLinkElement.prototype, "sheet");
  // FontFaceSet has no global interface object in Chromium: take forEach from document.fonts.
  var fontsForEach = uncurry(O.getPrototypeOf(document.fonts).forEach);
  var faceLoad = uncurry(FontFace.prototype.load);
  var faceStatus = getter(FontFace.prototype, "status");
  var faceFamily = getter(FontFace.prototype, "family");
  var replaceState = uncurry(History.prototype.replaceState);
  // visual resources the DOM does not announce (CSS images, SVG <image>, video posters)
  var computedStyle = uncurry(window.getComputedStyle);
  var propValue = uncurry(CSSStyleDeclaration.prototype.getPropertyValue);
  var docElement = getter(Document.prototype, "documentElement");
  var baseURI = getter(Node.prototype, "baseURI");
  var NewImage = Image;
  var imgSrcSet = setter(HTMLImageElement.prototype, "src");
  var imgDecode = uncurry(HTMLImageElement.prototype.decode);
  var videoPoster = getter(HTMLVideoElement.prototype, "poster");
  var URLCtor = URL, urlHref = getter(URL.prototype, "href");
  var moTake = uncurry(MutationObserver.prototype.takeRecords);
  var win = window, doc = document, hist = history;
  var dynImport = function (u) { return import(u); };

  // ---- configuration, copied out of the object the host wrote ------------------------
  var PROTOCOL = "render-ready.v1";
  var REF = toStr(CONFIG.ref), DIGEST = toStr(CONFIG.input_digest), BUILD = toStr(CONFIG.host_build);
  var FILE_TYPE = toStr(CONFIG.file_type), KIND = toStr(CONFIG.kind);
  var MAIN = toStr(CONFIG.main || ""), MODULE = toStr(CONFIG.module || "");
  var ROOT_ID = toStr(CONFIG.root_id);
  var ASSETS = create(null);
  var ak = objectKeys(CONFIG.assets || {});
  for (var i = 0; i < ak.length; i++) ASSETS[ak[i]] = toStr(CONFIG.assets[ak[i]]);
  var PLATFORM_BASE = toStr(CONFIG.platform_base || "");

  // A public browser may carry the token in ?access=: take it out of the address bar before
  // any content can read it (the document set a cookie for its subresources).
  try {
    if (indexOf(toStr(location.search), "access=") >= 0) replaceState(hist, null, "", toStr(location.pathname));
  } catch (e) { /* keep going */ }

  // ---- limits ---------------------------------------------------------------------------
  var MAX_MESSAGE = 300, MAX_FAULTS = 32, MAX_FAILURES = 32, MAX_RECEIPTS = 64, MAX_SCENES = 64;
  var MAX_REF = 80;
  // CSS images, SVG <image> and video posters: distinct URLs awaited, elements inspected. Past
  // either limit the page counts one failed image (it is never captured half loaded).
  var MAX_VISUALS = 256, MAX_SCAN = 20000;

  // ---- lists without Array.prototype: null-prototype records ---------------------------
  function list() { var l = create(null); l.n = 0; l.items = create(null); return l; }
  function push(l, v) { l.items[l.n] = v; l.n = l.n + 1; }
  function clear(l) { l.n = 0; l.items = create(null); }
  function rec() { return create(null); }

  function clip(s, n) {
    s = toStr(s);
    return s.length > n ? strSlice(s, 0, n) + "…" : s;
  }
  function validChars(s, max) {
    if (typeof s !== "string" || s.length === 0 || s.length > max) return false;
    for (var i = 0; i < s.length; i++) {
      var c = charCodeAt(s, i);
      if (!(c >= 97 && c <= 122 || c >= 65 && c <= 90 || c >= 48 && c <= 57 || c === 95 || c === 45)) return false;
    }
    return true;
  }
  function safeName(s) { return validChars(s, 64); }   // scene names (rendercontract: 1-64 of [A-Za-z0-9_-])
  function safeID(s) { return validChars(s, 128); }    // request IDs (rendercontract.ValidID)
  function describe(err) {
    try {
      if (err === null || err === undefined) return "unknown error";
      if (typeof err === "object" || typeof err === "function") {
        var name = err.name, msg = err.message;
        var s = (typeof name === "string" && name !== "" ? name : "thrown value") +
          (typeof msg === "string" && msg !== "" ? ": " + msg : "");
        return clip(s, MAX_MESSAGE);
      }
      return clip("thrown value: " + toStr(err), MAX_MESSAGE);
    } catch (e) { return "unreadable error"; }
  }

  // ---- state ---------------------------------------------------------------------------
  var init = "pending", initError = null, mount = "pending";
  var scenes = list(); push(scenes, "default");
  var sceneKnown = create(null); sceneKnown["default"] = true;
  var scene = "default";
  var receipts = list();
  var faults = list();               // content faults of the current scene
  var moduleFaults = list();         // content faults of the module, repeated in every scene
  var fonts = rec(); fonts.loaded = 0; fonts.failed = 0; fonts.pending = 0;
  var fontFailures = list();
  var other = create(null), otherSeq = 0; // kit resources: id -> {state, ref, permanent}
  var contentStarted = FILE_TYPE === "html"; // html content runs while the document is parsed
  var stylesLink = null, stylesState = "pending";
  var failedImages = new WS();
  // Images whose load event was seen. An image is loaded only then: a failed one is also
  // "complete" for a moment before its error event arrives, and must not count as loaded then.
  var loadedImages = new WS();
  var root = null;
  var visuals = create(null), visualCount = 0; // absolute URL -> {state, ref}
  var visualsNow = list();                     // the URLs the document refers to now
  var visualsOver = "";                         // why the last scan went past a limit
  var visualsDirty = true, visualObserver = null;

  // ---- the payload, written field by field ----------------------------------------------
  function q(s) { return stringify(toStr(s)); } // a primitive string: no toJSON is consulted
  function num(n) { return isFiniteNumber(n) ? "" + n : "0"; }
  function counts(c) { return '{"loaded":' + num(c.loaded) + ',"failed":' + num(c.failed) + ',"pending":' + num(c.pending) + "}"; }
  function strings(l) {
    var s = "[";
    for (var i = 0; i < l.n; i++) s += (i ? "," : "") + q(l.items[i]);
    return s + "]";
  }
  function faultList() {
    var s = "[", k = 0;
    for (var pass = 0; pass < 2; pass++) {
      var l = pass === 0 ? moduleFaults : faults;
      for (var i = 0; i < l.n && k < MAX_FAULTS; i++, k++) {
        var f = l.items[i];
        s += (k ? "," : "") + '{"code":' + q(f.code) + ',"message":' + q(f.message) + ',"scene":' + q(scene) +
          ',"blocking":' + (f.blocking ? "true" : "false") + "}";
      }
    }
    return s + "]";
  }
  function receiptList() {
    var s = "[", from = receipts.n > MAX_RECEIPTS ? receipts.n - MAX_RECEIPTS : 0;
    for (var i = from; i < receipts.n; i++) {
      var r = receipts.items[i];
      s += (i > from ? "," : "") + '{"request_id":' + q(r.request_id) + ',"scene":' + q(r.scene) + ',"state":' + q(r.state) +
        (r.message ? ',"message":' + q(r.message) : "") + "}";
    }
    return s + "]";
  }

  // images: every <img> in the content root, counted from the DOM at each publish
  function imageSummary(failures) {
    var c = rec(); c.loaded = 0; c.failed = 0; c.pending = 0;
    if (!root) return c;
    var nl;
    try { nl = qsa(root, "img"); } catch (e) { return c; }
    var n = nlLength(nl);
    for (var i = 0; i < n; i++) {
      var img = nlItem(nl, i);
      if (wsHas(failedImages, img)) {
        c.failed++;
        if (failures.n < MAX_FAILURES) push(failures, failure("image", imageRef(img), true));
      } else if (imgComplete(img) && imgCurrentSrc(img) === "") {
        c.failed++;
        if (failures.n < MAX_FAILURES) push(failures, failure("image", imageRef(img), true));
      } else if (wsHas(loadedImages, img)) {
        c.loaded++;
      } else c.pending++;
    }
    return c;
  }
  function imageRef(img) {
    var id = getAttribute(img, "data-asset-id");
    if (id) return clip(id, MAX_REF);
    var src = toStr(getAttribute(img, "src") || "");
    var cut = indexOf(src, "?"); if (cut >= 0) src = strSlice(src, 0, cut); // never a query: it may be signed
    cut = indexOf(src, "#"); if (cut >= 0) src = strSlice(src, 0, cut);
    var slash = lastIndexOf(src, "/");
    if (slash >= 0) src = strSlice(src, slash + 1);
    if (strSlice(src, 0, 5) === "data:") src = "data URL";
    return clip(src || "(no src)", MAX_REF);
  }

  // ---- visual resources no element event announces ------------------------------------------
  // CSS images (background-image and the other image properties, on elements and their
  // ::before/::after), SVG <image> and video posters. The document is scanned whenever it
  // changed (a mutation, a stylesheet load, a mount) and each URL it refers to is loaded once
  // more through a detached image: the browser shares one cached resource per URL, so that
  // image's load (and decode) is the moment the element can paint it, and its error is the
  // element's failure. Nothing is awaited forever: the renderer's content budget bounds the
  // wait and a pending resource is reported with it.
  var VISUAL_PROPS = ["background-image", "border-image-source", "list-style-image", "mask-image", "-webkit-mask-image"];
  var PSEUDOS = ["::before", "::after"];
  function fetchable(u) {
    var p = strSlice(u, 0, 6);
    return p === "https:" || strSlice(p, 0, 5) === "http:" || strSlice(p, 0, 5) === "data:" || strSlice(p, 0, 5) === "blob:";
  }
  function visualRef(u) {
    if (strSlice(u, 0, 5) === "data:") return "data URL";
    var s = u, cut = indexOf(s, "?"); if (cut >= 0) s = strSlice(s, 0, cut); // never a query: it may be signed
    cut = indexOf(s, "#"); if (cut >= 0) s = strSlice(s, 0, cut);
    var slash = lastIndexOf(s, "/");
    if (slash >= 0) s = strSlice(s, slash + 1);
    var akeys = objectKeys(ASSETS);
    for (var i = 0; i < akeys.length; i++) {
      var a = ASSETS[akeys[i]];
      if (s !== "" && strSlice(a, a.length - s.length - 1) === "/" + s) return clip(akeys[i], MAX_REF);
    }
    return clip(s || "(no name)", MAX_REF);
  }
  function loadVisual(u, v) {
    var img;
    var done = function (ok) {
      if (v.state !== "pending") return;
      v.state = ok ? "loaded" : "failed";
      publish();
    };
    // failures while starting are counted by the scan under way (no publish inside one)
    try { img = new NewImage(); } catch (e) { v.state = "failed"; return; }
    addListener(img, "load", function () {
      var p;
      try { p = imgDecode(img); } catch (e) { done(true); return; }
      then(p, function () { done(true); }, function () { done(true); });
    });
    addListener(img, "error", function () { done(false); });
    try { imgSrcSet(img, u); } catch (e) { v.state = "failed"; }
  }
  function trackVisual(u, seen) {
    if (!fetchable(u) || seen[u]) return;
    seen[u] = true;
    var v = visuals[u];
    if (!v) {
      if (visualCount >= MAX_VISUALS) { visualsOver = "more than " + MAX_VISUALS + " distinct CSS, SVG or poster images"; return; }
      visualCount++;
      v = rec(); v.state = "pending"; v.ref = visualRef(u);
      visuals[u] = v;
      loadVisual(u, v);
    }
    push(visualsNow, u);
  }
  // urlsIn tracks every url("…") of a computed value (computed values hold absolute URLs in
  // double quotes, with \ and \" escaped).
  function urlsIn(value, seen) {
    var from = 0, n = value.length;
    for (;;) {
      var i = indexOf(value, 'url("', from);
      if (i < 0) return;
      var j = i + 5, u = "";
      while (j < n) {
        var c = strSlice(value, j, j + 1);
        if (c === "\\" && j + 1 < n) { u += strSlice(value, j + 1, j + 2); j += 2; continue; }
        if (c === '"') break;
        u += c; j++;
      }
      from = j + 1;
      trackVisual(u, seen);
    }
  }
  function inspectElement(el, seen) {
    var cs, k, v;
    cs = computedStyle(win, el, null);
    for (k = 0; k < VISUAL_PROPS.length; k++) {
      v = propValue(cs, VISUAL_PROPS[k]);
      if (v && v !== "none") urlsIn(v, seen);
    }
    for (var p = 0; p < PSEUDOS.length; p++) {
      cs = computedStyle(win, el, PSEUDOS[p]);
      v = propValue(cs, "content");
      if (!v || v === "none" || v === "normal") continue; // no box, nothing painted
      urlsIn(v, seen);
      for (k = 0; k < VISUAL_PROPS.length; k++) {
        v = propValue(cs, VISUAL_PROPS[k]);
        if (v && v !== "none") urlsIn(v, seen);
      }
    }
    var name = localName(el);
    if (name === "video") {
      trackVisual(toStr(videoPoster(el) || ""), seen);
    } else if (name === "image" && nsURI(el) === "http://www.w3.org/2000/svg") {
      var href = getAttribute(el, "href");
      if (href === null) href = getAttribute(el, "xlink:href");
      if (href) trackVisual(urlHref(new URLCtor(toStr(href), baseURI(el))), seen);
    }
  }
  function scanVisuals() {
    if (!domReady) return;
    if (visualObserver !== null) {
      try { if (moTake(visualObserver).length > 0) visualsDirty = true; } catch (e) { visualsDirty = true; }
    }
    if (!visualsDirty) return;
    visualsDirty = false;
    clear(visualsNow);
    visualsOver = "";
    var seen = create(null), de = docElement(doc);
    if (!de) return;
    var nl = qsa(de, "*"), n = nlLength(nl);
    if (n + 1 > MAX_SCAN) { visualsOver = "more than " + MAX_SCAN + " elements to inspect for images"; n = MAX_SCAN - 1; }
    for (var i = -1; i < n; i++) {
      try { inspectElement(i < 0 ? de : nlItem(nl, i), seen); } catch (e) { /* a bad URL: nothing to load */ }
    }
  }
  function visualSummary(c, failures) {
    try { scanVisuals(); } catch (e) { /* counts of the last scan stay */ }
    for (var i = 0; i < visualsNow.n; i++) {
      var v = visuals[visualsNow.items[i]];
      if (v.state === "pending") c.pending++;
      else if (v.state === "loaded") c.loaded++;
      else {
        c.failed++;
        if (failures.n < MAX_FAILURES) push(failures, failure("image", v.ref, true));
      }
    }
    if (visualsOver !== "") {
      c.failed++;
      if (failures.n < MAX_FAILURES) push(failures, failure("image", clip(visualsOver, MAX_REF), true));
    }
  }
  function observeVisuals() {
    var de = docElement(doc);
    if (!de) return;
    try {
      visualObserver = new MO(function () { visualsDirty = true; publish(); });
      moObserve(visualObserver, de, {childList: true, subtree: true, attributes: true});
    } catch (e) { visualObserver = null; }
  }
  function failure(kind, ref, permanent) { var f = rec(); f.kind = kind; f.ref = ref; f.permanent = permanent; return f; }

  function payload() {
    var failures = list();
    for (var i = 0; i < fontFailures.n && failures.n < MAX_FAILURES; i++) push(failures, fontFailures.items[i]);
    var images = imageSummary(failures);
    visualSummary(images, failures);
    var oc = rec(); oc.loaded = 0; oc.failed = 0; oc.pending = 0;
    var ids = objectKeys(other);
    for (var j = 0; j < ids.length; j++) {
      var r = other[ids[j]];
      if (r.state === "pending") oc.pending++;
      else if (r.state === "loaded") oc.loaded++;
      else {
        oc.failed++;
        if (failures.n < MAX_FAILURES) push(failures, failure("other", r.ref, r.permanent));
      }
    }
    var fl = "[";
    for (var k = 0; k < failures.n; k++) {
      var f = failures.items[k];
      fl += (k ? "," : "") + '{"kind":' + q(f.kind) + ',"ref":' + q(f.ref) + ',"permanent":' + (f.permanent ? "true" : "false") + "}";
    }
    fl += "]";
    return '{"protocol":' + q(PROTOCOL) + ',"artifact_id":' + q(REF) + ',"input_digest":' + q(DIGEST) +
      ',"host_build":' + q(BUILD) + ',"init":' + q(init) +
      ',"init_error":' + (initError ? '{"code":' + q(initError.code) + ',"message":' + q(initError.message) +
        ',"permanent":' + (initError.permanent ? "true" : "false") + "}" : "null") +
      ',"mount":' + q(mount) +
      ',"resources":{"fonts":' + counts(fonts) + ',"images":' + counts(images) + ',"other":' + counts(oc) + ',"failures":' + fl + "}" +
      ',"scenes":' + strings(scenes) + ',"scene":' + q(scene) + ',"scene_receipts":' + receiptList() +
      ',"content_faults":' + faultList() + "}";
  }

  function deepFreeze(v) {
    if (v && typeof v === "object") {
      var ks = objectKeys(v);
      for (var i = 0; i < ks.length; i++) deepFreeze(v[ks[i]]);
      freeze(v);
    }
    return v;
  }

  var last = "";
  function publish() {
    var p;
    try { p = payload(); } catch (e) { return; }
    if (p === last) return;
    last = p;
    if (send) {
      try { send(p); } catch (e) { /* the binding went away with the page */ }
    } else {
      // An ordinary browser: a frozen copy for people debugging. Nobody trusts it.
      try { defineProperty(win, "__renderReady", {value: deepFreeze(parse(p)), configurable: true, enumerable: false, writable: false}); } catch (e) { /* content took the name */ }
    }
  }

  // ---- host and content faults ----------------------------------------------------------
  function hostFault(code, message, permanent) {
    if (init !== "pending") return false; // decided before content can run (html: content cannot call it)
    init = "failed";
    initError = rec();
    initError.code = toStr(code); initError.message = clip(message, MAX_MESSAGE); initError.permanent = !!permanent;
    publish();
    runSwitches(); // waiting scene requests are answered: failed
    return true;
  }
  function contentFault(code, message, blocking, moduleLevel) {
    if (!contentStarted) return;
    var f = rec();
    f.code = toStr(code); f.message = typeof message === "string" ? clip(message, MAX_MESSAGE) : describe(message); f.blocking = !!blocking;
    var l = moduleLevel ? moduleFaults : faults;
    if (moduleFaults.n + faults.n < MAX_FAULTS) push(l, f);
    if (blocking && mount === "mounted") mount = "failed";
    publish();
  }

  // ---- resource events: capture listeners registered before any content ----------------
  addListener(win, "error", function (ev) {
    if (!ev.isTrusted) return;
    var t = evTarget(ev);
    if (t === win) {
      // an uncaught exception of content (a handler, a timer, an inline script of an html page)
      contentFault("UNCAUGHT_ERROR", describeErrorEvent(ev), false, false);
      return;
    }
    onResource(t, false);
  }, true);
  addListener(doc, "load", function (ev) {
    if (!ev.isTrusted) return;
    onResource(evTarget(ev), true);
  }, true);
  addListener(win, "unhandledrejection", function (ev) {
    if (!ev.isTrusted) return;
    contentFault("UNHANDLED_REJECTION", describe(rejReason(ev)), false, false);
  }, true);
  function describeErrorEvent(ev) {
    var e = errError(ev);
    if (e !== null && e !== undefined) return describe(e);
    return clip(errMessage(ev) || "script error", MAX_MESSAGE);
  }
  function onResource(t, ok) {
    var name;
    try { name = localName(t); } catch (e) { return; }
    visualsDirty = true; // a stylesheet may have brought CSS images
    if (name === "img") {
      if (ok) { wsAdd(loadedImages, t); wsDelete(failedImages, t); } else { wsAdd(failedImages, t); wsDelete(loadedImages, t); }
      publish();
      return;
    }
    if (name === "link" && stylesState === "pending" && getAttribute(t, "data-preview-host") === "styles" &&
        localName(parentNode(t)) === "head" && (stylesLink === null || stylesLink === t)) {
      stylesLink = t;
      stylesState = ok && linkSheet(t) !== null ? "loaded" : "failed";
      stylesDecided();
    }
  }

  // ---- fonts: every face the document declares, loaded and counted -------------------------
  function loadFonts() {
    var set;
    try { set = docFonts(doc); } catch (e) { return; }
    if (!set) return;
    fontsForEach(set, function (face) {
      var st = faceStatus(face);
      if (st === "loaded") { fonts.loaded++; return; }
      if (st === "error") { fontFailed(face); return; }
      fonts.pending++;
      var settled = false;
      var done = function (ok) {
        if (settled) return;
        settled = true;
        fonts.pending--;
        if (ok && faceStatus(face) === "loaded") fonts.loaded++; else fontFailed(face);
        publish();
      };
      try {
        then(faceLoad(face), function () { done(true); }, function () { done(false); });
      } catch (e) { /* pending stays: never a forged success */ }
    });
  }
  function fontFailed(face) {
    fonts.failed++;
    var fam = "font";
    try { fam = toStr(faceFamily(face)); } catch (e) { /* keep the default */ }
    if (strSlice(fam, 0, 1) === '"') fam = strSlice(fam, 1, fam.length - 1);
    if (fontFailures.n < MAX_FAILURES) push(fontFailures, failure("font", clip(fam, MAX_REF), false));
  }

  // ---- start-up ------------------------------------------------------------------------
  var domReady = false, started = false;
  function stylesDecided() {
    if (stylesState === "failed") {
      hostFault("STYLES_FETCH_FAILED", "the snapshot's styles could not be loaded", false);
      return;
    }
    publish();
    maybeStart();
  }
  addListener(doc, "DOMContentLoaded", function (ev) {
    if (!ev.isTrusted || domReady) return;
    domReady = true;
    root = getElementById(doc, ROOT_ID);
    observeImages();
    observeVisuals();
    maybeStart();
  }, true);

  function maybeStart() {
    if (started || !domReady || stylesState !== "loaded" || init !== "pending") return;
    started = true;
    // Every face the styles and (html) the page declare is known now; count them before init
    // is "ok", so there is no moment of "ok, mounted, nothing pending" before they load.
    loadFonts();
    if (FILE_TYPE === "html") {
      visualsDirty = true;
      init = "ok";
      mount = "mounted";
      for (var i = 0; i < faults.n; i++) if (faults.items[i].blocking) mount = "failed";
      publish();
      runSwitches();
      return;
    }
    var p;
    try { p = dynImport(MAIN); } catch (e) { hostFault("RUNTIME_INIT_FAILED", "the preview runtime could not be loaded", false); return; }
    then(p, function (m) {
      try { m.start(api); } catch (e) { hostFault("RUNTIME_INIT_FAILED", "the preview runtime failed to start", false); }
    }, function () {
      hostFault("RUNTIME_INIT_FAILED", "the preview runtime could not be loaded", false);
    });
  }

  // <img> in the content root: lazy loading would leave images outside the viewport pending.
  function observeImages() {
    if (!root) return;
    var eager = function () {
      var nl = qsa(root, "img[loading]");
      for (var i = 0, n = nlLength(nl); i < n; i++) {
        var img = nlItem(nl, i);
        if (getAttribute(img, "loading") !== "eager") setAttribute(img, "loading", "eager");
      }
      publish();
    };
    try {
      moObserve(new MO(eager), root, {childList: true, subtree: true, attributes: true, attributeFilter: ["src", "srcset", "loading"]});
    } catch (e) { /* counts still come from events */ }
    eager();
  }

  // ---- scenes ---------------------------------------------------------------------------
  var seenRequests = create(null), switchQueue = list(), switchHead = 0, switching = false;
  var switchHandler = null; // set by the runtime: function (name, done)
  addListener(win, "render-ready.v1:switch-scene", function (ev) {
    var d, name, id;
    try {
      d = evDetail(ev);
      if (d === null || typeof d !== "object") return;
      name = d.scene; id = d.request_id;
    } catch (e) { return; }
    if (typeof name !== "string" || !safeID(id) || seenRequests[id]) return;
    if (!safeName(name)) name = clip(name, 64);
    seenRequests[id] = true;
    var r = rec(); r.scene = name; r.request_id = id;
    push(switchQueue, r);
    runSwitches();
  }, true);

  function runSwitches() {
    if (switching || switchHead >= switchQueue.n) return;
    if (mount === "pending" && init !== "failed") return; // the first mount finishes first
    var r = switchQueue.items[switchHead];
    switchHead++;
    switching = true;
    var finish = function (state, message) {
      var rc = rec(); rc.request_id = r.request_id; rc.scene = r.scene; rc.state = state; rc.message = message ? clip(message, MAX_MESSAGE) : "";
      push(receipts, rc);
      switching = false;
      publish();
      runSwitches();
    };
    if (init === "failed") { finish("failed", "the preview host failed to initialise"); return; }
    if (!sceneKnown[r.scene]) {
      scene = r.scene;
      clear(faults);
      mount = "failed";
      contentFault("SCENE_UNKNOWN", "scene " + stringify(r.scene) + " is not declared by the content", true, false);
      finish("failed", "scene is not declared");
      return;
    }
    if (FILE_TYPE === "html" || switchHandler === null || moduleFaults.n > 0 && hasBlocking(moduleFaults)) {
      // nothing to re-render: html pages have one scene, a failed module fails every scene
      scene = r.scene;
      finish(mount === "mounted" ? "ready" : "failed", mount === "mounted" ? "" : "content failed to mount");
      return;
    }
    scene = r.scene;
    clear(faults);
    mount = "pending";
    publish();
    var called = false;
    try {
      switchHandler(r.scene, function () {
        if (called) return;
        called = true;
        finish(mount === "mounted" ? "ready" : "failed", mount === "mounted" ? "" : "content failed to mount");
      });
    } catch (e) {
      if (!called) { called = true; contentFault("RENDER_THREW", describe(e), true, false); mount = "failed"; finish("failed", "content failed to mount"); }
    }
  }
  function hasBlocking(l) {
    for (var i = 0; i < l.n; i++) if (l.items[i].blocking) return true;
    return false;
  }

  // ---- the runtime's handle (passed to main.js's start, never published on window) ----------
  function mounted(ok) {
    if (mount !== "pending") return;
    visualsDirty = true; // styles may have changed without a mutation (CSSOM)
    mount = ok && !hasBlocking(faults) && !hasBlocking(moduleFaults) ? "mounted" : "failed";
    publish();
    if (!switching) runSwitches();
  }
  var kit = freeze({
    assetURL: function (id) { return typeof id === "string" && ASSETS[id] !== undefined ? ASSETS[id] : null; },
    platformBase: PLATFORM_BASE,
    resource: function (name) {
      var id = "r" + (++otherSeq);
      var r = rec(); r.state = "pending"; r.ref = clip(typeof name === "string" && name ? name : "resource", MAX_REF); r.permanent = false;
      other[id] = r;
      publish();
      return freeze({
        loaded: function () { if (other[id] === r && r.state === "pending") { r.state = "loaded"; publish(); } },
        failed: function (permanent) { if (other[id] === r && r.state === "pending") { r.state = "failed"; r.permanent = permanent !== false; publish(); } },
        release: function () { if (other[id] === r) { delete other[id]; publish(); } }
      });
    },
    fault: function (code, message, blocking) { contentFault(safeName(code) ? code : "CONTENT_FAULT", message, blocking !== false, false); }
  });
  var api = freeze({
    module: MODULE,
    kind: KIND,
    kit: kit,
    root: function () { return root; },
    hostFault: hostFault,
    initOK: function () {
      if (init !== "pending" || contentStarted) return;
      init = "ok";
      publish();
    },
    contentStarted: function () { if (init === "ok") contentStarted = true; },
    moduleFault: function (code, message) { contentFault(code, message, true, true); },
    fault: function (code, message, blocking) { contentFault(code, message, blocking, false); },
    declareScenes: function (names) {
      if (!contentStarted) return;
      var n = 0;
      try { n = names.length; } catch (e) { return; }
      for (var i = 0; i < n && scenes.n < MAX_SCENES; i++) {
        var s = names[i];
        if (!safeName(s)) { contentFault("SCENE_NAME_INVALID", "scene names are 1 to 64 letters, digits, '_' or '-'", false, true); continue; }
        if (sceneKnown[s]) continue;
        sceneKnown[s] = true;
        push(scenes, s);
      }
      if (n > MAX_SCENES) contentFault("SCENES_LIMIT", "more than " + MAX_SCENES + " scenes are declared; the rest are ignored", false, true);
      publish();
    },
    mounted: mounted,
    onSwitch: function (fn) { if (switchHandler === null && typeof fn === "function") switchHandler = fn; }
  });

  publish();
})(/*PREVIEW_CONFIG*/);

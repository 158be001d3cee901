// The preview runtime for compiled tsx/jsx modules. The bootstrap imports this module once the
// document is parsed and its styles are loaded, and calls start with its handle; nothing of the
// content has run yet. start loads the runtime modules and the snapshot's module (a failure
// there is a host fault), then evaluates the module and mounts its default export (a failure
// from here on is a content fault), and answers scene switches.
import { Component, createElement, useLayoutEffect } from "react";
import { flushSync } from "react-dom";
import { createRoot } from "react-dom/client";
import { setKit } from "./host.js";

// Captured before any content runs.
const raf = window.requestAnimationFrame.bind(window);
const later = window.setTimeout.bind(window);
const createEl = document.createElement.bind(document);
const appendHead = (el) => document.head.appendChild(el);

// The modules the import map names: loaded before the content, so a fetch failure of one of
// them is the host's, never the content's.
const ENTRIES = ["./react.js", "./react-jsx-runtime.js", "./kit/layout.js", "./kit/text.js", "./kit/media.js", "./kit/chart.js", "./kit/ready.js"];

let started = false;

export function start(api) {
  if (started) return;
  started = true;
  run(api).catch((e) => {
    // Before contentStarted this is the host's fault; after it the bootstrap ignores hostFault.
    if (!api.hostFault("RUNTIME_INIT_FAILED", "the preview runtime failed: " + String(e && e.message), false)) {
      api.fault("RENDER_THREW", e, true);
      api.mounted(false);
    }
  });
}

function preload(url) {
  return new Promise((resolve) => {
    const l = createEl("link");
    l.rel = "modulepreload";
    l.href = url;
    l.setAttribute("data-preview-host", "module");
    l.onload = () => resolve(true);
    l.onerror = () => resolve(false);
    appendHead(l);
  });
}

// afterPaint runs fn once the frame after the commit has been rendered: the animation frame
// callback runs before that frame's style, layout and paint, a task queued from it after them.
// (Two animation frames waited one frame more, ~16 ms, for nothing the capture needs: the
// capture composites a fresh frame of the DOM as it is.)
function afterPaint(fn) {
  raf(() => later(fn, 0));
}

function isComponent(c) {
  return typeof c === "function" || (c !== null && typeof c === "object" && typeof c.$$typeof === "symbol");
}

class Boundary extends Component {
  constructor(props) {
    super(props);
    this.state = { failed: false };
  }
  static getDerivedStateFromError() {
    return { failed: true };
  }
  componentDidCatch(error) {
    this.props.onError(error);
  }
  render() {
    return this.state.failed ? null : this.props.children;
  }
}

function Commit({ onCommit, children }) {
  useLayoutEffect(() => {
    onCommit();
  }, []);
  return children;
}

async function run(api) {
  setKit(api.kit);
  try {
    await Promise.all(ENTRIES.map((e) => import(new URL(e, import.meta.url).href)));
  } catch (e) {
    api.hostFault("RUNTIME_INIT_FAILED", "a runtime module could not be loaded", false);
    return;
  }
  if (!(await preload(api.module))) {
    api.hostFault("MODULE_FETCH_FAILED", "the snapshot's module could not be loaded", false);
    return;
  }
  const root = createRoot(api.root());
  api.initOK();
  api.contentStarted();

  let mod;
  try {
    mod = await import(api.module);
  } catch (e) {
    api.moduleFault("MODULE_EVALUATION_FAILED", e);
    api.mounted(false);
    return;
  }
  let Entry, scenes;
  try {
    Entry = mod.default;
    scenes = api.kind === "component" ? mod.scenes : undefined;
  } catch (e) {
    api.moduleFault("MODULE_EVALUATION_FAILED", e);
    api.mounted(false);
    return;
  }
  if (!isComponent(Entry)) {
    api.moduleFault("DEFAULT_EXPORT_MISSING", "the module's default export is not a React component");
    api.mounted(false);
    return;
  }
  if (scenes !== undefined) {
    try {
      if (scenes === null || typeof scenes !== "object" || Array.isArray(scenes)) {
        throw new TypeError("the named export `scenes` must map scene names to props");
      }
      api.declareScenes(Object.keys(scenes).filter((k) => k !== "default"));
    } catch (e) {
      api.moduleFault("SCENES_EXPORT_INVALID", e);
      scenes = undefined;
    }
  }

  let seq = 0;
  const mountScene = (name) =>
    new Promise((resolve) => {
      let failed = false;
      let committed = false;
      let props = {};
      if (name !== "default") {
        try {
          const p = scenes ? scenes[name] : undefined;
          if (p !== undefined && p !== null && (typeof p !== "object" || Array.isArray(p))) {
            throw new TypeError("the props of scene " + JSON.stringify(name) + " are not an object");
          }
          props = p || {};
        } catch (e) {
          api.fault("SCENE_PROPS_INVALID", e, true);
          api.mounted(false);
          resolve();
          return;
        }
      }
      const onError = (e) => {
        failed = true;
        api.fault("RENDER_THREW", e, true);
      };
      const onCommit = () => {
        if (committed) return;
        committed = true;
        afterPaint(() => {
          api.mounted(!failed);
          resolve();
        });
      };
      seq++;
      try {
        flushSync(() =>
          root.render(
            createElement(Commit, { key: seq, onCommit }, createElement(Boundary, { onError }, createElement(Entry, props))),
          ),
        );
      } catch (e) {
        onError(e);
        if (!committed) {
          committed = true;
          api.mounted(false);
          resolve();
        }
      }
    });

  api.onSwitch((name, done) => {
    mountScene(name).then(done, done);
  });
  await mountScene("default");
}

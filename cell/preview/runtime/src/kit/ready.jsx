// @kit/ready: the render-ready.v1 hooks for content.
//
//   const data = useResource("prices");   // one pending resource while the component is mounted
//   data.loaded();  /  data.failed(permanent = true)
//
//   const ready = useSceneReady();         // the scene is not ready until ready() is called
//
// A resource registers when the component commits (before the scene counts as mounted) and is
// released when it unmounts, so every scene counts only its own.
import { useLayoutEffect, useState } from "react";
import { resource } from "../host.js";

function handle(name) {
  let state = "pending";
  let permanent = true;
  let reg = null;
  return {
    attach() {
      if (reg !== null) return;
      reg = resource(name);
      if (state === "loaded") reg.loaded();
      if (state === "failed") reg.failed(permanent);
    },
    detach() {
      if (reg !== null) reg.release();
      reg = null;
    },
    api: Object.freeze({
      loaded() {
        if (state !== "pending") return;
        state = "loaded";
        if (reg !== null) reg.loaded();
      },
      failed(p = true) {
        if (state !== "pending") return;
        state = "failed";
        permanent = p !== false;
        if (reg !== null) reg.failed(permanent);
      },
    }),
  };
}

export function useResource(name = "resource") {
  const [h] = useState(() => handle(String(name)));
  useLayoutEffect(() => {
    h.attach();
    return () => h.detach();
  }, [h]);
  return h.api;
}

export function useSceneReady(name = "scene") {
  return useResource(name).loaded;
}

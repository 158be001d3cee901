// The kit's handle on the bootstrap. main.js hands it over once, before any content runs; the
// kit modules reach it only through these functions, which give content no more than the kit's
// own powers (its resources, its asset IDs, its faults). The bootstrap's state and channel stay
// in the bootstrap's closure.
let kit = null;

const inert = Object.freeze({ loaded() {}, failed() {}, release() {} });

export function setKit(k) {
  if (kit === null && k) kit = k;
}

// assetURL returns the digest-addressed URL of an asset ID the snapshot pins, or null.
export function assetURL(id) {
  return kit ? kit.assetURL(id) : null;
}

// resource registers one pending resource of kind "other" and returns its handle.
export function resource(name) {
  return kit ? kit.resource(name) : inert;
}

// fault reports a content fault of the current scene.
export function fault(code, message, blocking) {
  if (kit) kit.fault(code, message, blocking);
}

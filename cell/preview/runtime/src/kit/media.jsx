// @kit/media: assets by ID. An ID resolves through the snapshot's pinned assets to
// <document>/blobs/<sha256 hex>; the bootstrap counts every <img> of the content as a visual
// resource (loaded, failed, pending), by its asset ID. An ID the snapshot does not pin is a
// blocking content fault: the page names an asset it cannot have.
import { useLayoutEffect } from "react";
import { assetURL, fault } from "../host.js";

export function Image({ asset, alt = "", fit = "contain", width, height, style, ...rest }) {
  const src = assetURL(asset);
  useLayoutEffect(() => {
    if (src === null) fault("ASSET_UNKNOWN", "asset " + JSON.stringify(String(asset)) + " is not part of the snapshot", true);
  }, [src, asset]);
  const box = { display: "block", width: width ?? "100%", height: height ?? "auto", objectFit: fit, ...style };
  if (src === null) return <div {...rest} data-kit="image" data-asset-id={String(asset)} role="img" aria-label={alt} style={box} />;
  return <img {...rest} data-kit="image" data-asset-id={asset} src={src} alt={alt} loading="eager" decoding="sync" style={box} />;
}

export function Figure({ asset, alt, caption, fit, width, height, style, ...rest }) {
  return (
    <figure {...rest} data-kit="figure" style={{ margin: 0, display: "flex", flexDirection: "column", gap: "8px", ...style }}>
      <Image asset={asset} alt={alt ?? caption ?? ""} fit={fit} width={width} height={height} />
      {caption !== undefined && (
        <figcaption style={{ fontFamily: "var(--font-body, sans-serif)", fontSize: "calc(16px * var(--font-scale, 1))", opacity: 0.75 }}>{caption}</figcaption>
      )}
    </figure>
  );
}

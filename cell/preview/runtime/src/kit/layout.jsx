// @kit/layout: slide layout primitives on the fixed canvas. Sizes are CSS pixels of the canvas;
// colours and fonts come from the theme's custom properties (styles.css), with fallbacks.
const px = (v, d) => (typeof v === "number" ? v + "px" : v === undefined ? d : v);

export function Slide({ background, padding = 64, children, style, ...rest }) {
  return (
    <div
      {...rest}
      data-kit="slide"
      style={{
        position: "absolute",
        inset: 0,
        boxSizing: "border-box",
        padding: px(padding, "64px"),
        background: background ?? "var(--page-background, var(--color-background, #ffffff))",
        color: "var(--color-text, #111111)",
        fontFamily: "var(--font-body, sans-serif)",
        overflow: "hidden",
        display: "flex",
        flexDirection: "column",
        ...style,
      }}
    >
      {children}
    </div>
  );
}

export function Stack({ gap = 16, align = "stretch", justify = "flex-start", children, style, ...rest }) {
  return (
    <div {...rest} data-kit="stack" style={{ display: "flex", flexDirection: "column", gap: px(gap, "16px"), alignItems: align, justifyContent: justify, minWidth: 0, ...style }}>
      {children}
    </div>
  );
}

export function Columns({ gap = 24, widths, align = "stretch", children, style, ...rest }) {
  const items = Array.isArray(children) ? children : [children];
  return (
    <div {...rest} data-kit="columns" style={{ display: "flex", flexDirection: "row", gap: px(gap, "24px"), alignItems: align, minWidth: 0, ...style }}>
      {items.map((child, i) => (
        <div key={i} style={{ flex: widths && widths[i] !== undefined ? "0 0 " + px(widths[i]) : "1 1 0", minWidth: 0 }}>
          {child}
        </div>
      ))}
    </div>
  );
}

export function Grid({ columns = 2, gap = 16, children, style, ...rest }) {
  return (
    <div
      {...rest}
      data-kit="grid"
      style={{ display: "grid", gridTemplateColumns: "repeat(" + Math.max(1, Math.floor(columns)) + ", minmax(0, 1fr))", gap: px(gap, "16px"), ...style }}
    >
      {children}
    </div>
  );
}

export function Spacer({ size, grow = size === undefined }) {
  return <div data-kit="spacer" aria-hidden="true" style={grow ? { flex: "1 1 0" } : { flex: "0 0 " + px(size, "0px") }} />;
}

// @kit/text: typography bound to the theme's heading, body and code roles (--font-heading,
// --font-body, --font-code) and scaled by the style's --font-scale.
const scaled = (n) => "calc(" + n + "px * var(--font-scale, 1))";

function text(Tag, kit, base) {
  return function KitText({ children, align, color, size, style, ...rest }) {
    return (
      <Tag
        {...rest}
        data-kit={kit}
        style={{ margin: 0, ...base, fontSize: size !== undefined ? scaled(size) : base.fontSize, textAlign: align, color: color ?? base.color, ...style }}
      >
        {children}
      </Tag>
    );
  };
}

export const Title = text("h1", "title", { fontFamily: "var(--font-heading, sans-serif)", fontSize: scaled(64), fontWeight: 700, lineHeight: 1.1 });
export const Heading = text("h2", "heading", { fontFamily: "var(--font-heading, sans-serif)", fontSize: scaled(40), fontWeight: 700, lineHeight: 1.2 });
export const Body = text("p", "body", { fontFamily: "var(--font-body, sans-serif)", fontSize: scaled(24), lineHeight: 1.4 });
export const Caption = text("p", "caption", { fontFamily: "var(--font-body, sans-serif)", fontSize: scaled(16), lineHeight: 1.3, opacity: 0.75 });

export function Code({ children, style, ...rest }) {
  return (
    <pre
      {...rest}
      data-kit="code"
      style={{ margin: 0, fontFamily: "var(--font-code, monospace)", fontSize: scaled(20), lineHeight: 1.4, whiteSpace: "pre-wrap", ...style }}
    >
      <code>{children}</code>
    </pre>
  );
}

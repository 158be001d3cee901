// @kit/chart: static SVG charts. Same props, same SVG: no animation, no randomness, no
// measuring of text, coordinates rounded to hundredths.
//
//   <BarChart data={[{label: "Q1", value: 12}, …]} width={600} height={360} />
//   <LineChart data={…} />      <PieChart data={…} />
const PALETTE = [
  "var(--color-primary, #1f6feb)",
  "var(--color-secondary, #8250df)",
  "var(--color-accent, #bf3989)",
  "var(--color-success, #1a7f37)",
  "var(--color-warning, #9a6700)",
  "var(--color-danger, #cf222e)",
];
const r2 = (n) => Math.round(n * 100) / 100;
const labelStyle = { fontFamily: "var(--font-body, sans-serif)", fill: "var(--color-text, #111111)" };

function points(data) {
  if (!Array.isArray(data)) return [];
  return data.map((d, i) => ({
    label: d && d.label !== undefined ? String(d.label) : String(i + 1),
    value: d && Number.isFinite(Number(d.value)) ? Number(d.value) : 0,
  }));
}

function frame(width, height, title, children, rest) {
  return (
    <svg {...rest} data-kit="chart" xmlns="http://www.w3.org/2000/svg" width={width} height={height} viewBox={"0 0 " + width + " " + height} role="img" aria-label={title}>
      {title !== undefined && (
        <text x={width / 2} y={20} textAnchor="middle" fontSize={16} style={labelStyle}>
          {title}
        </text>
      )}
      {children}
    </svg>
  );
}

function plotBox(width, height, title) {
  const top = title !== undefined ? 32 : 12;
  return { left: 40, top, right: width - 12, bottom: height - 28 };
}

function scale(values) {
  const max = Math.max(0, ...values);
  const min = Math.min(0, ...values);
  return { min, max: max === min ? min + 1 : max };
}

export function BarChart({ data, width = 600, height = 360, title, color, ...rest }) {
  const pts = points(data);
  const box = plotBox(width, height, title);
  const { min, max } = scale(pts.map((p) => p.value));
  const y = (v) => box.bottom - ((v - min) / (max - min)) * (box.bottom - box.top);
  const slot = (box.right - box.left) / Math.max(1, pts.length);
  const bar = slot * 0.7;
  return frame(
    width,
    height,
    title,
    <g>
      <line x1={box.left} y1={r2(y(0))} x2={box.right} y2={r2(y(0))} stroke="currentColor" strokeOpacity={0.4} />
      {pts.map((p, i) => {
        const x = box.left + slot * i + (slot - bar) / 2;
        const top = Math.min(y(p.value), y(0));
        return (
          <g key={i}>
            <rect x={r2(x)} y={r2(top)} width={r2(bar)} height={r2(Math.abs(y(p.value) - y(0)))} style={{ fill: color ?? PALETTE[0] }} />
            <text x={r2(x + bar / 2)} y={height - 8} textAnchor="middle" fontSize={12} style={labelStyle}>
              {p.label}
            </text>
          </g>
        );
      })}
    </g>,
    rest,
  );
}

export function LineChart({ data, width = 600, height = 360, title, color, ...rest }) {
  const pts = points(data);
  const box = plotBox(width, height, title);
  const { min, max } = scale(pts.map((p) => p.value));
  const y = (v) => box.bottom - ((v - min) / (max - min)) * (box.bottom - box.top);
  const step = pts.length > 1 ? (box.right - box.left) / (pts.length - 1) : 0;
  const x = (i) => (pts.length > 1 ? box.left + step * i : (box.left + box.right) / 2);
  const path = pts.map((p, i) => (i ? "L" : "M") + r2(x(i)) + " " + r2(y(p.value))).join(" ");
  const stroke = color ?? PALETTE[0];
  return frame(
    width,
    height,
    title,
    <g>
      <line x1={box.left} y1={r2(y(0))} x2={box.right} y2={r2(y(0))} stroke="currentColor" strokeOpacity={0.4} />
      {pts.length > 0 && <path d={path} style={{ fill: "none", stroke, strokeWidth: 3 }} />}
      {pts.map((p, i) => (
        <g key={i}>
          <circle cx={r2(x(i))} cy={r2(y(p.value))} r={4} style={{ fill: stroke }} />
          <text x={r2(x(i))} y={height - 8} textAnchor="middle" fontSize={12} style={labelStyle}>
            {p.label}
          </text>
        </g>
      ))}
    </g>,
    rest,
  );
}

export function PieChart({ data, width = 360, height = 360, title, colors, ...rest }) {
  const pts = points(data).filter((p) => p.value > 0);
  const total = pts.reduce((s, p) => s + p.value, 0);
  const top = title !== undefined ? 32 : 0;
  const cx = width / 2;
  const cy = top + (height - top) / 2;
  const radius = Math.max(1, Math.min(width, height - top) / 2 - 8);
  const palette = Array.isArray(colors) && colors.length ? colors : PALETTE;
  let angle = -Math.PI / 2;
  const slices = pts.map((p, i) => {
    const sweep = total > 0 ? (p.value / total) * Math.PI * 2 : 0;
    const a0 = angle;
    const a1 = angle + sweep;
    angle = a1;
    const fill = palette[i % palette.length];
    if (pts.length === 1) return <circle key={i} cx={r2(cx)} cy={r2(cy)} r={r2(radius)} style={{ fill }} />;
    const large = sweep > Math.PI ? 1 : 0;
    const d =
      "M" + r2(cx) + " " + r2(cy) +
      " L" + r2(cx + radius * Math.cos(a0)) + " " + r2(cy + radius * Math.sin(a0)) +
      " A" + r2(radius) + " " + r2(radius) + " 0 " + large + " 1 " + r2(cx + radius * Math.cos(a1)) + " " + r2(cy + radius * Math.sin(a1)) +
      " Z";
    return (
      <path key={i} d={d} style={{ fill }}>
        <title>{p.label}</title>
      </path>
    );
  });
  return frame(width, height, title, <g>{slices}</g>, rest);
}

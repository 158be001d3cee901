// Package design holds the design system's domain rules, free of HTTP and SQL: theme colors,
// scales and font bindings, the platform font presets, the style request forms and their
// normalised snapshot, font family names, font-weight and unicode-range descriptors, and the CSS
// generated from themes, styles and font families. Field errors name request paths (body.…) so
// the API can answer them as they are; cell/store keeps the rows.
package design

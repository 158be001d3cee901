// Package design holds the design system's domain rules, free of HTTP and SQL: theme colors,
// scales and font bindings, the platform font presets, the style request forms and their
// normalised snapshot, font family names, font-weight and unicode-range descriptors, and the CSS
// generated from themes, styles and font families; and the design system's objects themselves
// (objects.go), which cell/store reads and writes. It links no database driver and no HTTP
// framework (a test in cell/ checks it). Field errors name request paths (body.…) so the API
// can answer them as they are.
package design

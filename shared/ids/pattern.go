package ids

// Pattern is the regular expression of a valid ID with the prefix, as published in the OpenAPI
// document: the same rule as Valid.
func Pattern(prefix string) string {
	return "^" + prefix + "_[a-z2-7]{26}$"
}

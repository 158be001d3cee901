package design

// FontPreset is a platform font preset.
type FontPreset struct {
	Token    string   `json:"token"`
	Roles    []string `json:"roles"`
	Family   string   `json:"family"`
	Portable bool     `json:"portable"`
}

// FontPresets is the one preset table.
var FontPresets = []FontPreset{
	{Token: "platform-sans", Roles: []string{"heading", "body"}, Family: `"DejaVu Sans", sans-serif`, Portable: true},
	{Token: "system-ui", Roles: []string{"heading", "body"}, Family: "system-ui, sans-serif", Portable: false},
	{Token: "platform-mono", Roles: []string{"code"}, Family: `"DejaVu Sans Mono", monospace`, Portable: true},
	{Token: "monospace", Roles: []string{"code"}, Family: "monospace", Portable: false},
}

// PresetsFor lists the presets a role accepts, in table order.
func PresetsFor(role string) []FontPreset {
	var out []FontPreset
	for _, p := range FontPresets {
		for _, r := range p.Roles {
			if r == role {
				out = append(out, p)
			}
		}
	}
	return out
}

// DefaultPreset is the preset a role gets when a theme names nothing: the first portable preset
// of the role (it renders the same on every client).
func DefaultPreset(role string) FontPreset {
	for _, p := range PresetsFor(role) {
		if p.Portable {
			return p
		}
	}
	return PresetsFor(role)[0]
}

// PresetTokens lists the tokens a role accepts.
func PresetTokens(role string) []string {
	var out []string
	for _, p := range PresetsFor(role) {
		out = append(out, p.Token)
	}
	return out
}

// DefaultPresets is the preset of each role when a theme names none.
func DefaultPresets() map[string]string {
	out := map[string]string{}
	for _, role := range FontRoles {
		out[role] = DefaultPreset(role).Token
	}
	return out
}

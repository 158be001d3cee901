package api

import "testing"

func TestContentDisposition(t *testing.T) {
	for in, want := range map[string]string{
		"logo.png":             `inline; filename="logo.png"; filename*=UTF-8''logo.png`,
		"../../etc/passwd.png": `inline; filename="passwd.png"; filename*=UTF-8''passwd.png`,
		`..\..\boot.ini`:       `inline; filename="boot.ini"; filename*=UTF-8''boot.ini`,
		"a\r\nSet-Cookie: x":   `inline; filename="aSet-Cookie: x"; filename*=UTF-8''aSet-Cookie%3A%20x`,
		"rapport é.pdf":        `inline; filename="rapport _.pdf"; filename*=UTF-8''rapport%20%C3%A9.pdf`,
		`q"uote;x.png`:         `inline; filename="q_uote_x.png"; filename*=UTF-8''q%22uote%3Bx.png`,
		"evil\u202Egnp.exe":    `inline; filename="evilgnp.exe"; filename*=UTF-8''evilgnp.exe`,
		"tab\x01.png":          `inline; filename="tab.png"; filename*=UTF-8''tab.png`,
		"../":                  `inline; filename="download"; filename*=UTF-8''download`,
		".hidden":              `inline; filename="hidden"; filename*=UTF-8''hidden`,
	} {
		if got := contentDisposition(in); got != want {
			t.Errorf("%q:\n got %s\nwant %s", in, got, want)
		}
	}
	if got := extValue("\x05"); got != "%05" {
		t.Fatalf("extValue: %s", got)
	}
}

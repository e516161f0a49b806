package rpm

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		small    string // expected small URL, or "" when an error is expected
		err      string
	}{
		{"draft names", `{"version":1,"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}`, "https://h/s", ""},
		{"networkQuality names", `{"version":1,"urls":{"small_https_download_url":"https://h:8443/s","large_https_download_url":"https://h:8443/l","https_upload_url":"https://h:8443/u"}}`, "https://h:8443/s", ""},
		{"unknown names ignored", `{"version":1,"test_endpoint":"x","extra":[1],"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u","foo":"bar"}}`, "https://h/s", ""},
		{"our own server's object", string(mustJSON(t, newConfigJSON("[::1]:4443"))), "https://[::1]:4443/small", ""},
		{"version 2", `{"version":2,"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}`, "", `"version" is 2`},
		{"no version", `{"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}`, "", `"version" is 0`},
		{"missing upload", `{"version":1,"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l"}}`, "", `"upload_url"`},
		{"plain http", `{"version":1,"urls":{"small_download_url":"http://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}`, "", "HTTPS only"},
		{"relative URL", `{"version":1,"urls":{"small_download_url":"/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}`, "", "not an absolute URL"},
		{"different hosts", `{"version":1,"urls":{"small_download_url":"https://a/s","large_download_url":"https://b/l","upload_url":"https://a/u"}}`, "", "different hosts"},
		{"not JSON", `<html>`, "", "not a JSON object"},
	} {
		e, err := parseConfig([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && e.Small.String() != tc.small:
			t.Errorf("%s: small URL %s, want %s", tc.name, e.Small, tc.small)
		}
	}
}

func TestConfigURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"router.lan:4443", "https://router.lan:4443/.well-known/nq", ""},
		{"192.0.2.1", "https://192.0.2.1/.well-known/nq", ""},
		{"[2001:db8::1]:4443", "https://[2001:db8::1]:4443/.well-known/nq", ""},
		{"https://h/", "https://h/.well-known/nq", ""},
		{"https://h:8443/api/v1/config", "https://h:8443/api/v1/config", ""},
		{"http://h/config", "", "only https://"},
		{"https://", "", "not a URL"},
	} {
		got, err := configURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("configURL(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("configURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseConfig: whatever a server sends, the parser either refuses it
// or returns three https URLs on one host — never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add(`{"version":1,"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l","upload_url":"https://h/u"}}`)
	f.Add(`{"version":1,"urls":{"small_https_download_url":"https://[::1]:1/s","large_https_download_url":"https://[::1]:1/l","https_upload_url":"https://[::1]:1/u"}}`)
	f.Add(`{"version":1,"urls":{"small_download_url":"https://a/s","large_download_url":"https://b/l","upload_url":"https://a/u"}}`)
	f.Add(`{"version":1.5}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, data string) {
		e, err := parseConfig([]byte(data))
		if err != nil {
			return
		}
		for _, u := range []*url.URL{e.Small, e.Large, e.Upload} {
			if u.Scheme != "https" || u.Host == "" || u.Host != e.Small.Host {
				t.Fatalf("accepted %q with URL %v", data, u)
			}
		}
	})
}

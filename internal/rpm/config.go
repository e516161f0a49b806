package rpm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Paths the server answers. The draft's discovery URI is /.well-known/nq;
// /config is what networkQuality users type after -C out of habit (Apple's
// sample servers publish it there).
const (
	pathWellKnown = "/.well-known/nq"
	pathConfig    = "/config"
	pathSmall     = "/small"
	pathLarge     = "/large"
	pathUpload    = "/upload"
)

// configJSON is the test configuration object. The draft names the URLs
// small_download_url, large_download_url and upload_url; Apple's
// networkQuality reads the *_https_* names. The server writes both sets (as
// Apple's own sample configurations do) and the client accepts either.
type configJSON struct {
	Version int      `json:"version"`
	URLs    urlsJSON `json:"urls"`
}

type urlsJSON struct {
	SmallHTTPS  string `json:"small_https_download_url,omitempty"`
	LargeHTTPS  string `json:"large_https_download_url,omitempty"`
	UploadHTTPS string `json:"https_upload_url,omitempty"`
	Small       string `json:"small_download_url,omitempty"`
	Large       string `json:"large_download_url,omitempty"`
	Upload      string `json:"upload_url,omitempty"`
}

// endpoints are the three URLs a test needs.
type endpoints struct {
	Small, Large, Upload *url.URL
}

func newConfigJSON(host string) configJSON {
	u := func(p string) string { return (&url.URL{Scheme: "https", Host: host, Path: p}).String() }
	return configJSON{Version: 1, URLs: urlsJSON{
		SmallHTTPS: u(pathSmall), LargeHTTPS: u(pathLarge), UploadHTTPS: u(pathUpload),
		Small: u(pathSmall), Large: u(pathLarge), Upload: u(pathUpload),
	}}
}

// parseConfig validates a configuration object (checkConfig); its error
// is a configError, so a fetch that failed on it says so (fetchFailure).
func parseConfig(data []byte) (endpoints, error) {
	e, err := checkConfig(data)
	if err != nil {
		return e, configError{err}
	}
	return e, nil
}

// configError: the server answered, with a config sqmkit cannot use.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// checkConfig validates a configuration object the way the draft asks
// clients to: version 1, all three URLs, one host for all three (so they
// can share connections). Only https is accepted because the TLS handshake
// time is one of the formula's terms.
func checkConfig(data []byte) (endpoints, error) {
	var c configJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return endpoints{}, fmt.Errorf("rpm config: not a JSON object: %v", err)
	}
	if c.Version != 1 {
		return endpoints{}, fmt.Errorf("rpm config: \"version\" is %d, only 1 is understood", c.Version)
	}
	pick := func(draft, apple, name string) (*url.URL, error) {
		s := cmp.Or(draft, apple)
		if s == "" {
			return nil, fmt.Errorf("rpm config: \"urls\" has neither %q nor %q", name, strings.Replace(name, "_download", "_https_download", 1))
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("rpm config: %q is not an absolute URL: %q", name, s)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("rpm config: %q is %q; sqmkit measures over HTTPS only (the TLS handshake is part of the RPM formula)", name, s)
		}
		if u.User != nil {
			return nil, fmt.Errorf("rpm config: %q (%s) carries credentials, which sqmkit never sends", name, u.Redacted())
		}
		return u, nil
	}
	var e endpoints
	var err error
	if e.Small, err = pick(c.URLs.Small, c.URLs.SmallHTTPS, "small_download_url"); err != nil {
		return endpoints{}, err
	}
	if e.Large, err = pick(c.URLs.Large, c.URLs.LargeHTTPS, "large_download_url"); err != nil {
		return endpoints{}, err
	}
	if e.Upload, err = pick(c.URLs.Upload, c.URLs.UploadHTTPS, "upload_url"); err != nil {
		return endpoints{}, err
	}
	if e.Small.Host != e.Large.Host || e.Small.Host != e.Upload.Host {
		return endpoints{}, fmt.Errorf("rpm config: the three URLs name different hosts (%s, %s, %s); the draft requires one host", e.Small.Host, e.Large.Host, e.Upload.Host)
	}
	return e, nil
}

// configURL turns what the user typed into the configuration URL: a bare
// host[:port] gets https:// and the draft's well-known path.
func configURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("rpm: %q is not a URL or host[:port]", s)
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("rpm: %q: only https:// servers can be measured", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = pathWellKnown
	}
	return u.String(), nil
}

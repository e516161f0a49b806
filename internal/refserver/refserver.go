//go:build !router

// Package refserver lays out the reference responsiveness server: the
// nginx setup of network-quality-server (the IETF draft's reference), with
// Debian's nginx and the paths of a test or a lab run. It is what
// `sqmkit test URL`, `sqmkit tune --server URL` and goresponsiveness are
// checked against, in make test (cmd/sqmkit TestReferenceResponsivenessServer)
// and in the lab (sqmkit-lab rpm).
package refserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sqmkit/sqmkit/internal/rpm"
)

// Port is where nginx serves the protocol (HTTPS, HTTP/2).
const Port = 8443

// Write lays out the server in dir for addr: its configuration, a 1-byte
// small object, a 4 GiB large one (sparse), the config JSON at
// https://addr:Port/config, a self-signed certificate for addr, and /slurp
// proxied to backend (an HTTPS upload sink at backend/upload, as
// `sqmkit serve --rpm` has, since the setup's own Go and Swift backends
// are not pinned). It returns the config URL.
func Write(dir, addr, backend string) (string, error) {
	cert, key, err := rpm.SelfSignedPEM([]string{addr})
	if err != nil {
		return "", err
	}
	return write(dir, backend, site{addr: addr, port: Port, host: addr, cert: cert, key: key,
		config: "/config", small: "/files/small", large: "/files/large", upload: "/slurp"})
}

// site is one layout of the server: where nginx listens, the host its URLs
// and certificate name, and the paths of its config and objects. alias
// serves the objects at paths of their own (the impersonated public
// server's); without it they are the reference setup's files under root.
type site struct {
	addr, host   string
	port         int
	cert, key    []byte
	config       string
	small, large string
	upload       string
	alias        bool
}

func write(dir, backend string, s site) (string, error) {
	for _, d := range []string{"root/files", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	host := s.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	base := "https://" + host
	if s.port != 443 {
		base += fmt.Sprintf(":%d", s.port)
	}
	cfg := fmt.Sprintf(`{"version": 1, "urls": {"small_https_download_url": "%[1]s%[2]s", "large_https_download_url": "%[1]s%[3]s", "https_upload_url": "%[1]s%[4]s", "small_download_url": "%[1]s%[2]s", "large_download_url": "%[1]s%[3]s", "upload_url": "%[1]s%[4]s"}}`,
		base, s.small, s.large, s.upload)
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"root/files/small", []byte("x"), 0o644},
		{"root/config", []byte(cfg), 0o644},
		{"cert.pem", s.cert, 0o644},
		{"key.pem", s.key, 0o600},
		{"nginx.conf", []byte(conf(dir, backend, s)), 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return "", err
		}
	}
	f, err := os.Create(filepath.Join(dir, "root/files/large"))
	if err != nil {
		return "", err
	}
	err = errors.Join(f.Truncate(4<<30), f.Close())
	return base + s.config, err
}

// Command is nginx in the foreground on dir's configuration; stop it with
// SIGTERM, which lets its master stop the workers (a killed master leaves
// them running).
func Command(nginx, dir string) []string {
	return []string{nginx, "-p", dir + "/", "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;"}
}

// Failed is nginx's error log when it says the server did not start.
func Failed(dir string) error {
	if l := Log(dir); strings.Contains(l, "[emerg]") {
		return fmt.Errorf("nginx did not start:\n%s", l)
	}
	return nil
}

// Log is nginx's error log, for a failure's story.
func Log(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
	return string(b)
}

// conf is the reference nginx.conf's directives with dir's paths, one
// worker, the backend's upload path (sqmkit's is /upload), and ChaCha20
// for a client that lists it first, as a client without AES instructions
// does: the lab's emulated CPU has none, and under the reference's own
// order both ends ran AES-256-GCM in software, which took the guest's
// CPU from the download (TestChaChaWithoutAES; docs/results.md).
func conf(dir, backend string, s site) string {
	listen := s.addr
	if strings.Contains(listen, ":") {
		listen = "[" + listen + "]"
	}
	objects := fmt.Sprintf("location %[2]s { root %[1]s/root; }\n\t\tlocation %[3]s { root %[1]s/root; }\n\t\tlocation /config { alias %[1]s/root/config; }", dir, s.large, s.small)
	if s.alias {
		objects = fmt.Sprintf("location = %[2]s { alias %[1]s/root/files/large; }\n\t\tlocation = %[3]s { alias %[1]s/root/files/small; }\n\t\tlocation = %[4]s { alias %[1]s/root/config; }", dir, s.large, s.small, s.config)
	}
	return fmt.Sprintf(`user root;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 1024; multi_accept off; accept_mutex off; }
http {
	default_type application/octet-stream;
	access_log off;
	client_body_temp_path %[1]s/tmp; proxy_temp_path %[1]s/tmp; fastcgi_temp_path %[1]s/tmp; uwsgi_temp_path %[1]s/tmp; scgi_temp_path %[1]s/tmp;
	sendfile on;
	tcp_nodelay on;
	keepalive_timeout 65;
	output_buffers 2 128k;
	upstream localhost_slurp {
		keepalive 1024;
		keepalive_requests 10485760;
		keepalive_timeout 60s;
		server %[3]s max_fails=0 fail_timeout=0s;
	}
	server {
		listen %[2]s:%[4]d ssl http2 reuseport;
		server_name %[6]s;
		client_max_body_size 250M;
		server_tokens off;
		ssl_certificate %[1]s/cert.pem;
		ssl_certificate_key %[1]s/key.pem;
		ssl_session_cache shared:SSL:1m;
		ssl_session_timeout 5m;
		ssl_protocols TLSv1.2 TLSv1.3;
		ssl_ciphers HIGH:AES-128:!aNULL:!MD5;
		ssl_prefer_server_ciphers on;
		ssl_conf_command Options PrioritizeChaCha;
		%[7]s
		location %[5]s {
			proxy_buffers 32 4k;
			proxy_buffer_size 4k;
			proxy_busy_buffers_size 16k;
			proxy_buffering off;
			proxy_set_header Host $host;
			proxy_pass https://localhost_slurp/upload;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_request_buffering off;
		}
		location /.well-known/nq { alias %[1]s/root/config; }
	}
}
`, dir, listen, backend, s.port, s.upload, s.host, objects)
}

//go:build !router

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestReferenceResponsivenessServer: the real protocol's server and
// client. Behind a bloated 20 Mbit/s tbf (250 ms of queue each way), the
// reference responsiveness server (network-quality-server's nginx setup:
// Debian's nginx with its configuration, /slurp on a backend as that
// setup asks, here sqmkit serve --rpm's upload sink, since the setup's own
// Go and Swift backends are not pinned) is graded by `sqmkit test URL`:
// its download with the letter `sqmkit test` gives against sqmkit serve on
// the same path, and so is the router build's (HTTP/1.1). goresponsiveness (the draft's authors' client, built from its
// pinned commit by scripts/goresponsiveness.sh) and `sqmkit test --rpm`
// then measure the RPM against the same server, and the log sets their
// figures side by side (docs/results.md: they differ, and why).
func TestReferenceResponsivenessServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs about a minute of tests through a tbf")
	}
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		tctest.Missing(t, "nginx not installed (scripts/deps.sh installs it)")
	}
	gr, err := exec.Command("../../scripts/goresponsiveness.sh").Output()
	if err != nil {
		tctest.Missing(t, "goresponsiveness did not build (scripts/goresponsiveness.sh): %v", err)
	}
	goresp := strings.TrimSpace(string(gr))
	srv, cli := tctest.NewPair(t, "rq", 84)
	bloat(t, srv, cli)
	bin := buildSqmkit(t)
	dir := t.TempDir()
	base := "https://" + srv.Addr + ":8443"
	writeReferenceServer(t, dir, srv.Addr, base)

	serveRPM(t, srv, bin, srv.Addr+":8693", "127.0.0.1:4043") // and /slurp's backend
	ng := exec.Command("ip", "netns", "exec", srv.Name, nginx, "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM, not a kill: nginx's master then stops its workers, which
	// a killed master leaves running in the deleted namespace
	defer func() { ng.Process.Signal(syscall.SIGTERM); ng.Wait() }()
	time.Sleep(time.Second)
	if b, _ := os.ReadFile(filepath.Join(dir, "error.log")); strings.Contains(string(b), "[emerg]") {
		t.Fatalf("nginx did not start:\n%s", b)
	}

	grade := gradeEach(t, cli, bin, map[string][]string{"sqmkit serve": {srv.Addr}, "reference server": {base + "/config", "--rpm-insecure"}}, func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return "\nnginx:\n" + string(b)
	})
	ref := grade["reference server"]
	if !ref.RTTOnly || ref.RPM == nil {
		t.Errorf("reference server's result: rtt_only %v, rpm %+v", ref.RTTOnly, ref.RPM)
	}
	sameDownloadGrade(t, ref, grade["sqmkit serve"])

	// The router build speaks HTTP/1.1 to the same nginx (its TLS and
	// HTTP/1.1 client, no HTTP/2): the same download letter, and it says
	// what it cannot measure.
	const routerName = "reference server, router build"
	onRouter := gradeEach(t, cli, buildSqmkit(t, "router"), map[string][]string{routerName: {base + "/config", "--rpm-insecure"}}, nil)[routerName]
	if !onRouter.RTTOnly || onRouter.RPM != nil || !strings.Contains(strings.Join(onRouter.Notes, " "), "over HTTP/1.1") {
		t.Errorf("router build against the reference server: rtt_only %v, rpm %+v, notes %q", onRouter.RTTOnly, onRouter.RPM, onRouter.Notes)
	}
	sameDownloadGrade(t, onRouter, grade["sqmkit serve"])

	// The RPM as the draft measures it (connections added to saturation,
	// to stability), per direction: goresponsiveness as it ships, then
	// sqmkit test --rpm, one after the other on the same path.
	// goresponsiveness aggregates as the draft's earlier versions did, the
	// mean of the foreign and the loaded latencies; sqmkit follows the
	// current text, the mean of the two rates (docs/commands.md,
	// "Responsiveness (RPM)"), so sqmkit's latencies are also aggregated
	// as goresponsiveness does.
	out, err := exec.Command("ip", "netns", "exec", cli.Name, goresp, "--url", base+"/config", "--insecure-skip-verify", "--rpm.timeout", "30").CombinedOutput()
	theirs := regexp.MustCompile(`(?s)(Download|Upload):.*?RPM:\s+(\d+) \(Single-Sided`).FindAllSubmatch(out, -1)
	if err != nil || len(theirs) != 2 {
		t.Fatalf("goresponsiveness: %v\n%s", err, out)
	}
	b, err := exec.Command("ip", "netns", "exec", cli.Name, bin, "test", "--rpm", base+"/config", "--rpm-insecure", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("sqmkit test --rpm: %v\n%s", err, b)
	}
	t.Logf("goresponsiveness:\n%s\nsqmkit test --rpm:\n%s", out, b)
	ours := regexp.MustCompile(`(download|upload): \d+ RPM on \d+ connections \(\w+ confidence\): TCP ([\d.]+), TLS ([\d.]+), GET ([\d.]+) ms on new connections, ([\d.]+) ms on loaded ones`).FindAllSubmatch(b, -1)
	if len(ours) != 2 {
		t.Fatalf("sqmkit test --rpm printed no stages:\n%s", b)
	}
	for i, m := range theirs {
		want, _ := strconv.ParseFloat(string(m[2]), 64)
		f := func(j int) float64 { v, _ := strconv.ParseFloat(string(ours[i][j]), 64); return v }
		got := 60000 / ((f(5) + (f(2)+f(3)+f(4))/3) / 2)
		t.Logf("%s: goresponsiveness %.0f RPM; sqmkit's latencies aggregated as goresponsiveness does: %.0f RPM (%+.0f %%)", m[1], want, got, 100*(got/want-1))
	}
}

// writeReferenceServer lays out network-quality-server's nginx setup in
// dir for addr: its configuration (paths and our temp dirs aside), a
// 1-byte small object, a 4 GiB large one (sparse), the config JSON naming
// base, and a self-signed certificate for addr.
func writeReferenceServer(t *testing.T, dir, addr, base string) {
	t.Helper()
	for _, d := range []string{"root/files", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "root/files/small"), []byte("x"), 0o644)
	f, err := os.Create(filepath.Join(dir, "root/files/large"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(4 << 30)
	f.Close()
	cfg := fmt.Sprintf(`{"version": 1, "urls": {"small_https_download_url": "%[1]s/files/small", "large_https_download_url": "%[1]s/files/large", "https_upload_url": "%[1]s/slurp", "small_download_url": "%[1]s/files/small", "large_download_url": "%[1]s/files/large", "upload_url": "%[1]s/slurp"}}`, base)
	os.WriteFile(filepath.Join(dir, "root/config"), []byte(cfg), 0o644)

	tctest.Certificate(t, dir, addr)

	// The reference nginx.conf's directives, with this test's paths, one
	// worker, and the backend's upload path (sqmkit's is /upload).
	conf := fmt.Sprintf(`user root;
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
		server 127.0.0.1:4043 max_fails=0 fail_timeout=0s;
	}
	server {
		listen %[2]s:8443 ssl http2 reuseport;
		client_max_body_size 250M;
		server_tokens off;
		ssl_certificate %[1]s/cert.pem;
		ssl_certificate_key %[1]s/key.pem;
		ssl_session_cache shared:SSL:1m;
		ssl_session_timeout 5m;
		ssl_protocols TLSv1.2 TLSv1.3;
		ssl_ciphers HIGH:AES-128:!aNULL:!MD5;
		ssl_prefer_server_ciphers on;
		location /files/large { root %[1]s/root; }
		location /files/small { root %[1]s/root; }
		location /slurp {
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
		location /config { alias %[1]s/root/config; }
		location /.well-known/nq { alias %[1]s/root/config; }
	}
}
`, dir, addr)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

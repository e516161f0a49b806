package refserver

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/tc/tctest"
)

// TestWrite: the layout for an IPv4 and an IPv6 address, its config URL
// and JSON naming the same base, a certificate for the address, and an
// nginx.conf whose syntax Debian's nginx accepts (nginx -t, when installed).
func TestWrite(t *testing.T) {
	for _, tc := range []struct{ addr, url, listen string }{
		{"10.3.0.2", "https://10.3.0.2:8443/config", "listen 10.3.0.2:8443 ssl http2"},
		{"fd00:3::2", "https://[fd00:3::2]:8443/config", "listen [fd00:3::2]:8443 ssl http2"},
	} {
		dir := t.TempDir()
		url, err := Write(dir, tc.addr, "127.0.0.1:4043")
		if err != nil {
			t.Fatal(err)
		}
		if url != tc.url {
			t.Errorf("%s: url %q, want %q", tc.addr, url, tc.url)
		}
		var cfg struct {
			URLs map[string]string `json:"urls"`
		}
		b, _ := os.ReadFile(filepath.Join(dir, "root/config"))
		if err := json.Unmarshal(b, &cfg); err != nil || len(cfg.URLs) != 6 {
			t.Fatalf("%s: config %s: %v", tc.addr, b, err)
		}
		base := strings.TrimSuffix(tc.url, "/config")
		for k, v := range cfg.URLs {
			if !strings.HasPrefix(v, base+"/") {
				t.Errorf("%s: %s = %q, not under %s", tc.addr, k, v, base)
			}
		}
		conf, _ := os.ReadFile(filepath.Join(dir, "nginx.conf"))
		for _, want := range []string{tc.listen, "server 127.0.0.1:4043 ", "proxy_pass https://localhost_slurp/upload", "alias " + dir + "/root/config"} {
			if !strings.Contains(string(conf), want) {
				t.Errorf("%s: nginx.conf lacks %q", tc.addr, want)
			}
		}
		if st, err := os.Stat(filepath.Join(dir, "root/files/large")); err != nil || st.Size() != 4<<30 {
			t.Errorf("%s: large object: %v", tc.addr, err)
		}
		pb, _ := os.ReadFile(filepath.Join(dir, "cert.pem"))
		blk, _ := pem.Decode(pb)
		if blk == nil {
			t.Fatalf("%s: cert.pem holds no PEM", tc.addr)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.VerifyHostname(tc.addr); err != nil {
			t.Errorf("%s: %v", tc.addr, err)
		}
		if net.ParseIP(tc.addr) == nil {
			t.Fatalf("bad case %q", tc.addr)
		}
		nginx, err := exec.LookPath("nginx")
		if err != nil {
			t.Logf("nginx not installed: its syntax check skipped (scripts/deps.sh installs it)")
			continue
		}
		// nginx -t also binds the address, which this host lacks: its
		// syntax verdict is what is checked
		if out, _ := exec.Command(nginx, "-t", "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); !strings.Contains(string(out), "syntax is ok") {
			t.Errorf("%s: nginx -t:\n%s", tc.addr, out)
		}
	}
}

// TestChaChaWithoutAES: nginx on Write's layout gives ChaCha20 to a
// client that lists it first (Go's order on a CPU without AES
// instructions, as the lab's guest is) and still AES-256-GCM to one that
// lists that first (a client with AES instructions, as the reference
// server's own order would).
func TestChaChaWithoutAES(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		tctest.Missing(t, "nginx not installed (scripts/deps.sh installs it)")
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		tctest.Missing(t, "openssl not installed (scripts/deps.sh installs it)")
	}
	cli, srv := tctest.NewPair(t, "ngx", 75)
	dir := t.TempDir()
	if _, err := Write(dir, srv.Addr, "127.0.0.1:4043"); err != nil {
		t.Fatal(err)
	}
	ng := exec.Command("ip", append([]string{"netns", "exec", srv.Name}, Command(nginx, dir)...)...)
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ng.Process.Signal(syscall.SIGTERM); ng.Wait() }()
	if err := tctest.WaitListening(srv.Name, "tcp", Port, 10*time.Second); err != nil {
		t.Fatalf("%v\nnginx:\n%s", err, Log(dir))
	}
	const chacha, aes = "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_256_GCM_SHA384"
	for _, tc := range []struct{ offer, want string }{
		{chacha + ":" + aes, chacha},
		{aes + ":" + chacha, aes},
	} {
		c := exec.Command("ip", "netns", "exec", cli.Name, openssl, "s_client", "-connect", fmt.Sprintf("%s:%d", srv.Addr, Port), "-ciphersuites", tc.offer)
		c.Stdin = strings.NewReader("")
		out, _ := c.CombinedOutput()
		if !strings.Contains(string(out), "Cipher is "+tc.want) {
			t.Errorf("offered %s, want %s:\n%s\nnginx:\n%s", tc.offer, tc.want, out, Log(dir))
		}
	}
}

// TestWritePublic: the impersonation is the compiled-in default's URL, its
// certificate verifies for the public host against the CA it hands the
// clients and no other, its config names the host's own objects, and
// nginx takes its configuration.
func TestWritePublic(t *testing.T) {
	dir := t.TempDir()
	p, err := WritePublic(dir, "10.3.0.2", "127.0.0.1:4043")
	if err != nil {
		t.Fatal(err)
	}
	if p.URL != "https://mensura.cdn-apple.com/api/v1/gm/config" || p.Hosts != "10.3.0.2 mensura.cdn-apple.com\n" {
		t.Errorf("%+v", p)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(p.CA)) {
		t.Fatal("the CA is no PEM")
	}
	pb, _ := os.ReadFile(filepath.Join(dir, "cert.pem"))
	blk, _ := pem.Decode(pb)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{DNSName: p.Host, Roots: pool}); err != nil {
		t.Errorf("the server's certificate: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{DNSName: p.Host}); err == nil {
		t.Error("the system's own CAs trust the impersonation")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "root/config"))
	if !strings.Contains(string(b), `"large_https_download_url": "https://mensura.cdn-apple.com/api/v1/gm/large"`) {
		t.Errorf("config %s", b)
	}
	for _, f := range []string{"hosts", "resolv.conf", "certs/ca-certificates.crt"} {
		if _, err := os.Stat(filepath.Join(p.Client, f)); err != nil {
			t.Error(err)
		}
	}
	if nginx, err := exec.LookPath("nginx"); err == nil {
		if out, _ := exec.Command(nginx, "-t", "-p", dir+"/", "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); !strings.Contains(string(out), "syntax is ok") {
			t.Errorf("nginx -t:\n%s", out)
		}
	}
}

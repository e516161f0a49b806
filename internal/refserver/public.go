//go:build !router

package refserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbproto"
)

// The public default, impersonated: a test or tune with no server goes to
// bbproto.DefaultPublicServer, which no test may reach. WritePublic lays the
// reference server out as that host, with Apple's paths and a certificate
// from a CA of the test's own, and Confined runs a command in a network
// namespace where the host resolves to the server and only that CA is
// trusted. The product runs unchanged: its default is reached the way a
// router reaches it, by name, over TLS checked against the system's CA
// bundle (make test: cmd/sqmkit TestDefaultServerImpersonated, the lab's
// journey).

// Public is a laid-out impersonation of the public default.
type Public struct {
	URL  string // the compiled-in default's config URL
	Host string // its host name
	Port int    // where nginx listens (the URL's, 443)
	// CA is the certificate authority's PEM (for a CA bundle: OpenWrt's
	// ca-bundle puts it at /etc/ssl/certs/ca-certificates.crt), Hosts the
	// /etc/hosts line that sends Host to the server.
	CA, Hosts string
	// Client is the directory of what Confined mounts over the client's
	// /etc: hosts, resolv.conf, ssl/certs.
	Client string
}

// WritePublic lays out in dir the reference server as the public default
// at addr: its host name in the URLs and the certificate, its config path,
// its small, large and upload objects beside it (Apple's names), nginx on
// port 443; /slurp's backend as Write's.
func WritePublic(dir, addr, backend string) (Public, error) {
	u, err := url.Parse(bbproto.DefaultPublicServer)
	if err != nil {
		return Public{}, err
	}
	p := Public{URL: u.String(), Host: u.Hostname(), Port: 443, Client: filepath.Join(dir, "client")}
	base := strings.TrimSuffix(u.Path, "/config")
	caPEM, cert, key, err := caSigned(p.Host)
	if err != nil {
		return Public{}, err
	}
	p.CA = string(caPEM)
	p.Hosts = fmt.Sprintf("%s %s\n", addr, p.Host)
	s := site{addr: addr, port: p.Port, host: p.Host, cert: cert, key: key, config: u.Path,
		small: base + "/small", large: base + "/large", upload: base + "/slurp", alias: true}
	if _, err := write(dir, backend, s); err != nil {
		return Public{}, err
	}
	for name, text := range map[string]string{
		"hosts":                     "127.0.0.1 localhost\n::1 localhost\n" + p.Hosts,
		"resolv.conf":               "nameserver 127.0.0.1\n", // nothing answers there: no name leaves
		"certs/ca-certificates.crt": p.CA,
	} {
		path := filepath.Join(p.Client, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return Public{}, err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return Public{}, err
		}
	}
	return p, nil
}

// Confined is argv run, inside `ip netns exec NS` (which gives it a mount
// namespace of its own), with client's hosts, resolver and CA bundle
// mounted over the system's: the public default's host resolves to the
// impersonation, no other name resolves, and only its CA is trusted. A
// resolv.conf that cannot be covered (a dangling symlink) is left: no
// name server answers inside the test's namespaces either way.
func Confined(client string, argv []string) []string {
	script := fmt.Sprintf("mount --bind %[1]s/hosts /etc/hosts && mount --bind %[1]s/certs /etc/ssl/certs && { mount --bind %[1]s/resolv.conf /etc/resolv.conf 2>/dev/null || true; } && exec \"$@\"", client)
	return append([]string{"sh", "-c", script, "confined"}, argv...)
}

// caSigned makes a CA and a server certificate for host signed by it
// (ECDSA P-256, a day's validity either side of now), as PEM.
func caSigned(host string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sqmkit test CA (impersonation of " + host + ")"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

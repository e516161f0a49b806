package bbtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbserver"
)

// The test binary doubles as a server or a client process, so tests can run
// either end inside a network namespace (ip netns exec) or measure the
// server's memory apart from the clients'.
const helperEnv = "BBTEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "server":
		helperServer(os.Getenv("BBTEST_LISTEN"))
	case "client":
		helperClient()
	default:
		os.Exit(m.Run())
	}
}

// helperServer serves with limits far above any test's, says "ready" on
// stdout once listening, and runs until killed.
func helperServer(addr string) {
	ln, pc, err := listenPair(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready", ln.Addr())
	srv := bbserver.New(bbserver.Config{MaxTests: 1000, PerIP: 1000, MaxBytes: 1e15})
	srv.Serve(context.Background(), ln, pc)
}

// helperConfig is the part of Config a helper client process gets.
type helperConfig struct {
	Server                        string
	Idle, Download, Upload, Bidir time.Duration
	Streams                       int
}

// helperClient runs the test described by BBTEST_CONFIG (a helperConfig as
// JSON) and prints the result as JSON.
func helperClient() {
	var hc helperConfig
	if err := json.Unmarshal([]byte(os.Getenv("BBTEST_CONFIG")), &hc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg := Config{Server: hc.Server, Idle: hc.Idle, Download: hc.Download, Upload: hc.Upload, Bidir: hc.Bidir,
		Streams: hc.Streams, ProbeInterval: DefaultProbeInterval}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

// listenPair listens on TCP and UDP with the same port, as the client
// expects; port 0 picks a port free for both.
func listenPair(addr string) (net.Listener, *net.UDPConn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for try := 0; try < 20; try++ {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return ln, pc.(*net.UDPConn), nil
		}
		ln.Close()
		if port != "0" {
			return nil, nil, err
		}
	}
	return nil, nil, fmt.Errorf("no port free for both TCP and UDP on %s", host)
}

// serve runs an in-process server on loopback and returns its address.
func serve(t testing.TB, host string, cfg bbserver.Config) string {
	t.Helper()
	ln, pc, err := listenPair(net.JoinHostPort(host, "0"))
	if err != nil {
		t.Skipf("no %s loopback: %v", host, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { bbserver.New(cfg).Serve(ctx, ln, pc); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

func shortConfig(server string) Config {
	return Config{Server: server, Idle: 300 * time.Millisecond, Download: 500 * time.Millisecond,
		Upload: 500 * time.Millisecond, Bidir: 500 * time.Millisecond, Streams: 2, ProbeInterval: 10 * time.Millisecond}
}

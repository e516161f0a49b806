package bbclient

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqmkit/sqmkit/internal/bbserver"
	"github.com/sqmkit/sqmkit/internal/bbserver/bbservertest"
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
	ln, pc, err := bbservertest.ListenPair(addr)
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

// serve runs an in-process server on loopback and returns its address.
func serve(t testing.TB, host string, cfg bbserver.Config) string {
	addr, _ := bbservertest.Serve(t, host, cfg)
	return addr
}

func shortConfig(server string) Config {
	return Config{Server: server, Idle: 300 * time.Millisecond, Download: 500 * time.Millisecond,
		Upload: 500 * time.Millisecond, Bidir: 500 * time.Millisecond, Streams: 2, ProbeInterval: 10 * time.Millisecond}
}

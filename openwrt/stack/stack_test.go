package stack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBoot: the real userland boots as a router does (procd, then ubusd,
// rpcd, netifd and uhttpd from /etc/rc.d), and LuCI's login answers
// through the host's forward.
func TestBoot(t *testing.T) {
	r := New(t, Options{})
	out, err := r.Exec("ubus", "list")
	if err != nil {
		t.Fatalf("ubus list: %v: %s", err, out)
	}
	for _, obj := range []string{"service", "session", "network.interface", "uci", "luci", "luci-rpc", "system"} {
		if !strings.Contains("\n"+string(out), "\n"+obj+"\n") {
			t.Errorf("ubus has no %s:\n%s", obj, out)
		}
	}
	ps, _ := r.Exec("ps")
	for _, p := range []string{"/sbin/procd", "/sbin/ubusd", "/sbin/rpcd", "/sbin/netifd", "/usr/sbin/uhttpd"} {
		if !strings.Contains(string(ps), p) {
			t.Errorf("%s is not running:\n%s", p, ps)
		}
	}
	if !strings.Contains(string(ps), "    1 root     /sbin/procd") {
		t.Errorf("procd is not PID 1:\n%s", ps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := r.Forward(ctx, "127.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Post("http://"+addr+"/ubus", "application/json", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"call","params":["00000000000000000000000000000000","session","login",{"username":"root","password":""}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var reply struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || len(reply.Result) != 2 || !strings.Contains(string(reply.Result[1]), "ubus_rpc_session") {
		t.Fatalf("login through uhttpd: %s", b)
	}
	page, err := http.Get("http://" + addr + "/cgi-bin/luci/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(b), "luci.js") {
		t.Fatalf("LuCI's page:\n%s", b)
	}
}

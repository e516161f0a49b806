package browser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// router is a queue shaped in a test namespace, a sqmkit serve past it,
// the router's files, and the binaries the plugin runs.
type router struct {
	ns, root, bin string // namespace, --root, directory of sqmkit and the tc shim
	server        string // the sqmkit serve's address, past the shaped link
}

// env is the router's environment: the tc shim first in PATH, so the NSS
// tree the queue asks for runs on the host kernel's qdiscs.
func (r *router) env() []string {
	return []string{"PATH=" + r.bin + ":" + os.Getenv("PATH"), "SQMKIT_SHIM_FQ_CODEL=pfifo"}
}

// cmd is a command in the router's namespace and environment.
func (r *router) cmd(name string, args ...string) *exec.Cmd {
	full := append(append([]string{"netns", "exec", r.ns, "env"}, r.env()...), append([]string{name}, args...)...)
	return exec.Command("ip", full...)
}

// sqmkit runs the router's sqmkit and fails the test on an error.
func (r *router) sqmkit(t *testing.T, args ...string) string {
	t.Helper()
	out, err := r.cmd(filepath.Join(r.bin, "sqmkit"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sqmkit %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// plugin answers one ubus call the way rpcd does: it runs the plugin with
// `call METHOD`, the arguments on stdin, and takes its JSON object.
func (r *router) plugin(method string, args json.RawMessage) (json.RawMessage, error) {
	c := r.cmd(filepath.Join(r.bin, "sqmkit"), "rpcd", "--root", r.root, "call", method)
	c.Stdin = bytes.NewReader(args)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	if !json.Valid(out) || !bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) {
		return nil, fmt.Errorf("the plugin printed no JSON object: %q", out)
	}
	return out, nil
}

// rpcRequest is one ubus JSON-RPC request as rpc.js sends it.
type rpcRequest struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// serve starts the web side of a router: LuCI's runtime (runtime, a
// directory with luci.js and what it loads), luci-app-sqmkit's files over
// it, a page per view, and ubus over HTTP, where object sqmkit is the
// plugin and the rest answer as an empty LuCI would.
func serve(t *testing.T, r *router, runtime, app string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/luci-static/resources/", func(w http.ResponseWriter, req *http.Request) {
		rel := strings.TrimPrefix(req.URL.Path, "/luci-static/resources/")
		for _, dir := range []string{filepath.Join(app, "htdocs/luci-static/resources"), runtime} {
			if p := filepath.Join(dir, filepath.FromSlash(rel)); strings.HasPrefix(p, dir) && fileExists(p) {
				http.ServeFile(w, req, p)
				return
			}
		}
		http.NotFound(w, req)
	})
	mux.HandleFunc("/cgi-bin/luci/admin/network/sqmkit/", func(w http.ResponseWriter, req *http.Request) {
		view := strings.TrimPrefix(req.URL.Path, "/cgi-bin/luci/admin/network/")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, page, view, view)
	})
	ubus := func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var batch []rpcRequest
		single := !bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
		if single {
			var one rpcRequest
			json.Unmarshal(body, &one)
			batch = []rpcRequest{one}
		} else {
			json.Unmarshal(body, &batch)
		}
		var replies []map[string]any
		for _, rq := range batch {
			replies = append(replies, answer(t, r, rq))
		}
		w.Header().Set("Content-Type", "application/json")
		if single {
			json.NewEncoder(w).Encode(replies[0])
		} else {
			json.NewEncoder(w).Encode(replies)
		}
	}
	mux.HandleFunc("/ubus/", ubus)
	mux.HandleFunc("/cgi-bin/luci/admin/ubus/", ubus)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// answer is ubus's reply to one request.
func answer(t *testing.T, r *router, rq rpcRequest) map[string]any {
	reply := map[string]any{"jsonrpc": "2.0", "id": rq.ID}
	if rq.Method == "list" {
		reply["result"] = map[string]any{}
		return reply
	}
	var object, method string
	if len(rq.Params) < 4 || json.Unmarshal(rq.Params[1], &object) != nil || json.Unmarshal(rq.Params[2], &method) != nil {
		reply["error"] = map[string]any{"code": -32602, "message": "Invalid params"}
		return reply
	}
	switch {
	case object == "sqmkit":
		out, err := r.plugin(method, rq.Params[3])
		if err != nil {
			t.Errorf("plugin %s: %v", method, err)
			reply["result"] = []any{9}
			return reply
		}
		reply["result"] = []any{0, out}
	case object == "session" && method == "access":
		reply["result"] = []any{0, map[string]any{"access": true}}
	default:
		reply["result"] = []any{0, map[string]any{}}
	}
	return reply
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// page is what LuCI's view template renders for a view: the runtime, its
// environment, and the view instantiated into #view.
const page = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title></head>
<body><div id="maincontent"><div id="view"><div class="spinning">Loading view…</div></div></div>
<script src="/luci-static/resources/cbi.js"></script>
<script src="/luci-static/resources/luci.js"></script>
<script>
L = new LuCI({ media: '/luci-static/bootstrap', resource: '/luci-static/resources', scriptname: '/cgi-bin/luci',
	pathinfo: '/admin/network/sqmkit', documentroot: '/www', requestpath: [], dispatchpath: [], pollinterval: 5,
	ubuspath: '/ubus/', sessionid: '00000000000000000000000000000000', token: '0', nodespec: {},
	apply_rollback: 90, apply_holdoff: 4, apply_timeout: 5, apply_display: 1.5, rollback_token: null });
L.require('ui').then(function(ui) { ui.instantiateView('%s'); });
</script></body></html>
`

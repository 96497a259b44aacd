package broker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"strata/broker/config"
	"strata/controller"
)

func getReady(t *testing.T, s *Server) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	s.ReadyHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

// notReadyController is the embedded controller behind a switch that
// says whether the cluster metadata has come (ZooKeeper mode's Ready).
type notReadyController struct {
	controller.Controller
	ready atomic.Bool
}

func (c *notReadyController) Ready() bool { return c.ready.Load() }

// /readyz answers 503 with a one-line reason until the broker has loaded
// its logs and its controller knows the cluster, then 200.
func TestReadyzWaitsForLogsAndMetadata(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Load(map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := controller.OpenEmbedded(dir, controller.Broker{ID: 0, Host: "127.0.0.1", Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &notReadyController{Controller: emb}
	s, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), Controller: ctrl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if code, body := getReady(t, s); code != http.StatusServiceUnavailable || body != "not ready: loading logs\n" {
		t.Fatalf("readyz before start: %d %q, want 503 \"not ready: loading logs\"", code, body)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	code, body := getReady(t, s)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cluster metadata") || strings.Count(body, "\n") != 1 {
		t.Fatalf("readyz before the metadata came: %d %q, want 503 and one line about the cluster metadata", code, body)
	}
	ctrl.ready.Store(true)
	if code, body := getReady(t, s); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("readyz once ready: %d %q, want 200 \"ready\"", code, body)
	}
}

package broker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// readyController is a controller that learns the cluster after the
// broker registers (ZooKeeper mode): Ready tells whether it has.
type readyController interface{ Ready() bool }

// Ready returns nil once the broker can serve its share of the cluster:
// it has opened its logs, is registered (ZooKeeper mode: its znode is in
// the controller's view of /brokers/ids), and knows the cluster (the
// controller's metadata has come); else the first reason it is not, in
// one line. An offline log directory also makes it not ready.
func (s *Server) Ready() error {
	if !s.logsLoaded.Load() {
		return errors.New("loading logs")
	}
	if off := s.OfflineLogDirs(); len(off) > 0 {
		return fmt.Errorf("offline log directories: %s", strings.Join(off, ","))
	}
	if rc, ok := s.ctrl.(readyController); ok && !rc.Ready() {
		return errors.New("waiting for the cluster metadata from the controller")
	}
	md := s.ctrl.Metadata()
	if md == nil {
		return errors.New("no cluster metadata")
	}
	if _, ok := md.Broker(s.cfg.ID); !ok {
		return fmt.Errorf("broker %d is not registered in the cluster metadata", s.cfg.ID)
	}
	return nil
}

// ReadyHandler answers /readyz: 200 "ready" once Ready is nil, else 503
// with the reason in one line. A Kubernetes readiness probe or a load
// balancer uses it; /healthz (liveness) stays 200 while the broker is
// merely not ready.
func (s *Server) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ready")
	})
}

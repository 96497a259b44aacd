package bench

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Target names understood besides HOST:PORT.
const (
	TargetStrata = "strata"
	TargetKfake  = "kfake"
)

// Config is one workload and where and how to run it.
type Config struct {
	Workload

	// Targets: TargetStrata, TargetKfake or HOST:PORT (a seed broker).
	// Empty means Strata and kfake.
	Targets []string
	// StrataBin is the strata binary to start; empty means this executable
	// (set it when the caller is not the strata binary, e.g. a test).
	StrataBin string
	// StrataArgs are extra arguments to `strata serve`.
	StrataArgs []string
	// BrokerLog receives the Strata process's stdout and stderr (optional).
	BrokerLog io.Writer
	// PhaseTimeout bounds each phase beyond its planned length (setup,
	// backlog, drain, read-back).
	PhaseTimeout time.Duration

	// Progress receives a live progress line (optional; usually os.Stderr).
	Progress io.Writer
	// Logger logs lifecycle events; nil discards.
	Logger *slog.Logger
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	c.Workload = c.Workload.WithDefaults()
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = 5 * time.Minute
	}
	if len(c.Targets) == 0 {
		c.Targets = []string{TargetStrata, TargetKfake}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first invalid field of a defaulted Config.
func (c Config) Validate() error {
	if err := c.Workload.Validate(); err != nil {
		return err
	}
	for _, t := range c.Targets {
		if t != TargetStrata && t != TargetKfake && !strings.Contains(t, ":") {
			return fmt.Errorf("target %q: want strata, kfake or HOST:PORT", t)
		}
	}
	return nil
}

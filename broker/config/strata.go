package config

import (
	"strconv"
	"strings"
	"time"
)

// Strata's own broker configs (strata.*), which Kafka does not have, are
// checked for range beyond their type when they are altered
// (CheckStrataConfigs), and only where the broker's cluster Alter hook
// admits the connection (broker/interbroker.go).

// DrainRequested is the cluster-wide marker strata admin cluster drain
// sets (broker/drain.go).
const DrainRequested = "strata.drain.requested.ms"

// DrainClockSkew is how far ahead of a broker's clock a drain may be
// asked: the clock of the machine that asks may run a little ahead. A
// drain is set to the time it is asked, never later; one further ahead is
// refused, and ignored if found stored.
const DrainClockSkew = time.Minute

// IsStrataConfig tells whether name is one of Strata's own configs.
func IsStrataConfig(name string) bool { return strings.HasPrefix(name, "strata.") }

// CheckStrataConfigs checks Strata's own configs in m (canonical values)
// for range at time now: a drain cannot be set in the future. The error
// is INVALID_CONFIG with a one-line reason.
func CheckStrataConfigs(m map[string]string, now time.Time) error {
	if v, ok := m[DrainRequested]; ok {
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return invalidConfig("%s: %q is not a number", DrainRequested, v)
		}
		if limit := now.Add(DrainClockSkew).UnixMilli(); at > limit {
			return invalidConfig("%s=%d is in the future (broker clock %d ms): a drain is set to the time it is asked, as strata admin cluster drain does",
				DrainRequested, at, now.UnixMilli())
		}
	}
	return nil
}

// DrainInForce tells whether a stored drain marker at (ms, -1 none) is one
// a broker started at startedMs obeys at time now: asked after the broker
// started and not in the future (a marker stored before the check above
// existed, or written past it into ZooKeeper, is ignored).
func DrainInForce(at, startedMs int64, now time.Time) bool {
	return at >= 0 && at >= startedMs && at <= now.Add(DrainClockSkew).UnixMilli()
}

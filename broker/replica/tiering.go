package replica

import (
	"context"

	"strata/broker/plog"
)

// Tiering is what the follower fetchers need of tiered storage, which the
// broker owns (replica must not import strata/tier or strata/index). The
// broker implements it with its Server methods.
type Tiering interface {
	// Enabled tells whether tiered storage is on for this broker.
	Enabled() bool
	// SettingsKnown tells whether the tier settings of p's topic have
	// been applied.
	SettingsKnown(p *Partition) bool
	// TieredLocal tells whether p's local retention follows
	// local.retention.*: its topic is tiered and copying.
	TieredLocal(p *Partition) bool
	// RemoteReadable tells whether p has a remote log (its remote index
	// is read), whose log start follows the leader's.
	RemoteReadable(p *Partition) bool
	// RaiseRemoteLogStart raises the log start offset of p's remote
	// index to offset (DeleteRecords or retention on the leader).
	RaiseRemoteLogStart(p *Partition, offset int64) error
	// BuildAuxState is Kafka's buildRemoteLogAuxState, counted as one
	// build request: it finds the finished remote segment of p holding
	// offset and returns the reset to its end + 1 with its leader-epoch
	// checkpoint and producer snapshot, and the segment's id for the log.
	BuildAuxState(ctx context.Context, p *Partition, offset int64) (r plog.Reset, segment string, err error)
	// BuildFailed counts a failed rebuild (BuildAuxState, or applying it).
	BuildFailed()
}

// noTiering is a broker without tiered storage.
type noTiering struct{}

func (noTiering) Enabled() bool                               { return false }
func (noTiering) SettingsKnown(*Partition) bool               { return false }
func (noTiering) TieredLocal(*Partition) bool                 { return false }
func (noTiering) RemoteReadable(*Partition) bool              { return false }
func (noTiering) RaiseRemoteLogStart(*Partition, int64) error { return nil }
func (noTiering) BuildFailed()                                {}
func (noTiering) BuildAuxState(context.Context, *Partition, int64) (plog.Reset, string, error) {
	return plog.Reset{}, "", nil
}

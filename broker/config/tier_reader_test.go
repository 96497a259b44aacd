package config

import (
	"strings"
	"testing"
)

func TestLoadRemoteReader(t *testing.T) {
	b, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if b.RemoteLogIndexFileCacheTotalSizeBytes != 1<<30 || b.RemoteLogReaderCacheSizeBytes != 64<<20 || b.RemoteLogReaderReadaheadChunks != 2 {
		t.Fatalf("defaults: %d %d %d", b.RemoteLogIndexFileCacheTotalSizeBytes, b.RemoteLogReaderCacheSizeBytes, b.RemoteLogReaderReadaheadChunks)
	}
	b, err = Load(map[string]string{
		"remote.log.index.file.cache.total.size.bytes": "1", "remote.log.reader.cache.size.bytes": "0",
		"remote.log.reader.readahead.chunks": "64",
	})
	if err != nil || b.RemoteLogIndexFileCacheTotalSizeBytes != 1 || b.RemoteLogReaderCacheSizeBytes != 0 || b.RemoteLogReaderReadaheadChunks != 64 {
		t.Fatalf("set: %+v, %v", b, err)
	}
	for _, tt := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"remote.log.index.file.cache.total.size.bytes": "0"}, "remote.log.index.file.cache.total.size.bytes: must be >= 1, got 0"},
		{map[string]string{"remote.log.reader.cache.size.bytes": "-1"}, "remote.log.reader.cache.size.bytes: must be >= 0, got -1"},
		{map[string]string{"remote.log.reader.readahead.chunks": "-1"}, "remote.log.reader.readahead.chunks"},
		{map[string]string{"remote.log.reader.readahead.chunks": "65"}, "remote.log.reader.readahead.chunks"},
		{map[string]string{"remote.log.reader.cache.size.bytes": "lots"}, "remote.log.reader.cache.size.bytes"},
	} {
		_, err := Load(tt.props)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%v) error = %v, want one line containing %q", tt.props, err, tt.want)
		}
	}
	hand := *b
	hand.RemoteLogReaderReadaheadChunks = 65
	if err := hand.Validate(); err == nil || !strings.Contains(err.Error(), "remote.log.reader.readahead.chunks: must be <= 64") {
		t.Errorf("hand-built read-ahead 65: %v", err)
	}
	hand.RemoteLogReaderReadaheadChunks, hand.RemoteLogReaderCacheSizeBytes = 2, -5
	if err := hand.Validate(); err == nil || !strings.Contains(err.Error(), "remote.log.reader.cache.size.bytes") {
		t.Errorf("hand-built cache -5: %v", err)
	}
}

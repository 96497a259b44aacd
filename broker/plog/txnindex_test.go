package plog

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeTxnIndex: the .txnindex decoder never panics, and what it
// accepts encodes back to the same bytes.
func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(EncodeTxnIndex([]AbortedTxn{{1, 10, 20, 21}, {2, 15, 30, 31}}), int64(0))
	f.Add([]byte{0, 1}, int64(0))
	f.Add(make([]byte, abortedTxnSize), int64(5))
	f.Fuzz(func(t *testing.T, b []byte, base int64) {
		entries, err := DecodeTxnIndex(b, base)
		if err != nil {
			if !errors.Is(err, errCorruptTxnIndex) {
				t.Fatalf("error without errCorruptTxnIndex: %v", err)
			}
			return
		}
		if !bytes.Equal(EncodeTxnIndex(entries), b) {
			t.Fatalf("entries %v do not encode back to the input", entries)
		}
	})
}

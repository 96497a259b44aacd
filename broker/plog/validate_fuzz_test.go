package plog

import (
	"encoding/binary"
	"testing"
)

// FuzzRecordParsers: the one-pass parser of a record wholly at hand
// (fastRecord) accepts exactly the records the careful field-by-field
// reading accepts, with the same fields.
func FuzzRecordParsers(f *testing.F) {
	f.Add(rawRec{key: []byte("k"), value: []byte("v")}.body())
	f.Add(rawRec{tsDelta: -5, headers: []hdr{{[]byte("h"), nil}, {nil, []byte("x")}}}.body())
	f.Add([]byte{0, 0, 0, 3, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		ts, off, keyNull, ok := fastRecord(body)
		r := recReader{buf: append(binary.AppendVarint(nil, int64(len(body))), body...)}
		var rec recordInfo
		err := r.carefulRecord(&rec)
		if ok != (err == nil) {
			t.Fatalf("fast %v, careful %v", ok, err)
		}
		if ok && (rec.tsDelta != ts || rec.offsetDelta != off || rec.keyNull != keyNull) {
			t.Fatalf("fast %d %d %v, careful %+v", ts, off, keyNull, rec)
		}
	})
}

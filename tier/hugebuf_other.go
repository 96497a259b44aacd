//go:build !linux

package tier

// chunkBuffer allocates a chunk buffer of n bytes.
func chunkBuffer(n int64) []byte { return make([]byte, n) }

package tier

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on x86-64 and arm64
// (4 KiB base pages).
const hugePage = 2 << 20

// chunkBuffer allocates a chunk buffer of n bytes. From 2 MiB up, its
// aligned interior is advised for transparent huge pages before anything
// touches it, so that filling it faults in a huge page at a time rather
// than 512 small ones (with THP in "madvise" mode, the default of many
// distributions; elsewhere the advice changes nothing). The memory stays
// the garbage collector's.
func chunkBuffer(n int64) []byte {
	if n < hugePage {
		return make([]byte, n)
	}
	raw := make([]byte, n+hugePage)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	off := (hugePage - p%hugePage) % hugePage
	b := raw[off : off+uintptr(n) : off+uintptr(n)]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return b
}

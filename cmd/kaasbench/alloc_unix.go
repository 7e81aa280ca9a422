//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// allocatedBytes is the file's allocated blocks in bytes.
func allocatedBytes(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}

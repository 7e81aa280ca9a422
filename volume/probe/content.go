package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// The probe writes self-checking blocks: a header naming the block's
// version, then filler derived from the version. A reader can tell a whole
// block of one version from a partial or mixed one without knowing which
// version it should see.
const (
	headerLen = 27 // "kaasprobe " + 16 hex digits + "\n"
	minBlock  = headerLen + 8
)

var errTorn = errors.New("torn or partial contents")

// splitmix is a small mixing function for the filler.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// block returns the block of version v, size bytes long (size >= minBlock).
func block(v uint64, size int) []byte {
	b := make([]byte, size)
	copy(b, fmt.Sprintf("kaasprobe %016x\n", v))
	var w [8]byte
	for i := headerLen; i < size; i += 8 {
		binary.LittleEndian.PutUint64(w[:], splitmix(v^uint64(i)*0x2545f4914f6cdd1d))
		copy(b[i:], w[:])
	}
	return b
}

// versions checks that data is a whole number of blocks of size bytes,
// each intact, and returns their versions.
func versions(data []byte, size int) ([]uint64, error) {
	if len(data) == 0 || len(data)%size != 0 {
		return nil, fmt.Errorf("%w: %d bytes, not a multiple of %d", errTorn, len(data), size)
	}
	var out []uint64
	for off := 0; off < len(data); off += size {
		b := data[off : off+size]
		if string(b[:10]) != "kaasprobe " || b[headerLen-1] != '\n' {
			return nil, fmt.Errorf("%w: bad header at offset %d", errTorn, off)
		}
		v, err := strconv.ParseUint(string(b[10:headerLen-1]), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad header at offset %d", errTorn, off)
		}
		want := block(v, size)
		for i := range b {
			if b[i] != want[i] {
				return nil, fmt.Errorf("%w: block %d (version %d) differs at byte %d", errTorn, off/size, v, i)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

package volume

import (
	"crypto/sha256"
	"encoding/hex"
)

// NameMax is the longest name of one path component, in bytes, that kaas
// creates: Linux's NAME_MAX, which ext4, xfs, NFS and FUSE share. A longer
// component fails every call with ENAMETOOLONG.
const NameMax = 255

// nameHashDigits is how many hex digits of SHA-256 a shortened name keeps:
// 128 bits, so two different long names never share a shortened one.
const nameHashDigits = 32

// FitName returns stem+ext when that fits NameMax, and otherwise the
// bounded form: stem cut short, '~', nameHashDigits hex digits of
// SHA-256(stem), then ext. The plain form is what kaas has always written,
// so a name that fitted before is unchanged. The bounded form keeps a
// recognisable prefix, ends in ext, and is unique for each stem; it cannot
// be parsed back, so whoever needs the full stem stores it in the file (or
// in a stamp inside the directory). An ext too long to leave room for the
// hash gives a name longer than NameMax, which the filesystem refuses.
func FitName(stem, ext string) string { return fitName(stem, ext, NameMax) }

// fitName is FitName for a limit of max bytes.
func fitName(stem, ext string, max int) string {
	if len(stem)+len(ext) <= max {
		return stem + ext
	}
	keep := max - len(ext) - 1 - nameHashDigits
	if keep < 0 {
		keep = 0
	}
	sum := sha256.Sum256([]byte(stem))
	return stem[:keep] + "~" + hex.EncodeToString(sum[:nameHashDigits/2]) + ext
}

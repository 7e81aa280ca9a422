package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/kaas-dev/kaas/volume"
)

// Names under the cluster directory (docs/design.md §3).
const (
	BrokersDir     = "brokers"
	ControllerDir  = "controller"
	AssignmentFile = "assignment.json"
)

// readAttempts bounds the retries of a read of a file known to exist. A
// reader opening a name while another host replaces it can get ENOENT
// (JuiceFS) or ESTALE (GlusterFS, NFS); the next open normally succeeds.
const readAttempts = 4

// transientRead reports whether err is what a reader can get while another
// host replaces the file: not proof that the file is gone.
func transientRead(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESTALE)
}

// readKnown reads name, which the caller knows exists (a listing named it,
// or an exclusive create said EEXIST), through Open, retrying ENOENT and
// ESTALE a few times. The last error is returned if every attempt fails.
func readKnown(fsys volume.FS, name string) ([]byte, error) {
	var err error
	for range readAttempts {
		var b []byte
		if b, err = volume.ReadFile(fsys, name); err == nil {
			return b, nil
		}
		if !transientRead(err) {
			return nil, err
		}
	}
	return nil, err
}

// writeAtomicMkdir is volume.WriteFileAtomic that, when name's directory is
// missing, creates it durably and tries once more. The common path costs no
// Stat.
func writeAtomicMkdir(fsys volume.FS, name string, data []byte) error {
	err := volume.WriteFileAtomic(fsys, name, data)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if merr := volume.MkdirAllSync(fsys, path.Dir(name)); merr != nil {
		return fmt.Errorf("%w (and %w)", err, merr)
	}
	return volume.WriteFileAtomic(fsys, name, data)
}

// parseNumbered parses a base name "<n>.json" (n a non-negative decimal int32,
// any zero padding) and reports whether it is one.
func parseNumbered(base string) (int32, bool) {
	s, ok := strings.CutSuffix(base, ".json")
	if !ok || s == "" || volume.IsTempName(base) {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

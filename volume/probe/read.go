package probe

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/kaas-dev/kaas/volume"
)

// Outcomes of one read or create, as counted and sent by a child.
const (
	kindOK       = "ok"
	kindNotExist = "enoent"
	kindStale    = "estale"
	kindTorn     = "torn"
	kindError    = "error"
	kindWon      = "won"
	kindExist    = "eexist"
)

// classify names the class of err that a reader on a shared filesystem can
// get while another host replaces the file (ENOENT, ESTALE), or "error".
func classify(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return kindNotExist
	case errors.Is(err, syscall.ESTALE):
		return kindStale
	case errors.Is(err, errTorn):
		return kindTorn
	}
	return kindError
}

// readBlocks opens name, reads it whole, closes it, and returns the
// versions of its blocks of size bytes.
func readBlocks(fsys volume.FS, name string, size int) ([]uint64, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	data, rerr := io.ReadAll(f)
	cerr := f.Close()
	if rerr != nil {
		return nil, fmt.Errorf("read %s: %w", name, rerr)
	}
	if cerr != nil {
		return nil, fmt.Errorf("close %s: %w", name, cerr)
	}
	vs, err := versions(data, size)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return vs, nil
}

// readStats counts a reader loop's outcomes.
type readStats struct {
	Reads    int    `json:"reads"`
	NotExist int    `json:"enoent"`
	Stale    int    `json:"estale"`
	Torn     int    `json:"torn"`
	Errors   int    `json:"errors"`
	FirstBad string `json:"firstBad,omitempty"`
}

func (s *readStats) add(vs []uint64, err error) {
	s.Reads++
	if err == nil && len(vs) != 1 {
		err = fmt.Errorf("%w: %d blocks, want 1", errTorn, len(vs))
	}
	if err == nil {
		return
	}
	switch classify(err) {
	case kindNotExist:
		s.NotExist++
		return
	case kindStale:
		s.Stale++
		return
	case kindTorn:
		s.Torn++
	default:
		s.Errors++
	}
	if s.FirstBad == "" {
		s.FirstBad = err.Error()
	}
}

func (s *readStats) merge(o readStats) {
	s.Reads += o.Reads
	s.NotExist += o.NotExist
	s.Stale += o.Stale
	s.Torn += o.Torn
	s.Errors += o.Errors
	if s.FirstBad == "" {
		s.FirstBad = o.FirstBad
	}
}

// readLoop reads name until stop is closed. Its last read starts after
// stop was closed, so it always sees what the writer left.
func readLoop(fsys volume.FS, name string, size int, stop <-chan struct{}) readStats {
	var s readStats
	for {
		stopped := false
		select {
		case <-stop:
			stopped = true
		default:
		}
		s.add(readBlocks(fsys, name, size))
		if stopped {
			return s
		}
	}
}

// createOnce races for name with an exclusive create.
func createOnce(fsys volume.FS, name string) (string, error) {
	f, err := fsys.CreateExclusive(name)
	if errors.Is(err, fs.ErrExist) {
		return kindExist, nil
	}
	if err != nil {
		return kindError, err
	}
	if err := f.Close(); err != nil {
		return kindError, fmt.Errorf("close %s: %w", name, err)
	}
	return kindWon, nil
}

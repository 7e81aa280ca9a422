// Package versioned keeps a small set of entries in one directory of the
// control-plane volume, one whole file each, with a version token that
// every change replaces after it is made. Readers poll the token (one
// small read) and re-read the entries only when it changed, so what a
// broker reads per round does not grow with the entries when nothing
// changes. The ACLs and the client quotas are kept this way
// (docs/volume.md, "ACLs and client quotas").
//
// The four questions:
//  1. Atomic? Each entry is written by the atomic write or removed by one
//     unlink; the token is written by the atomic write after them. A crash
//     between an entry and the token leaves the entry in place and the
//     token unchanged: readers see the change at their next full reload
//     (Reader.FullEvery), and the writer's client, which got no answer,
//     retries the same change, which rewrites the same entry and the token.
//  2. Idempotent? Put of the same name and data and Remove of a missing
//     entry are no-ops in effect; every change ends with a new token.
//  3. One writer? Every broker may write entries; an entry's name is a
//     function of its content or identity (the caller's), so two writers
//     of one name write the same thing or the later wins whole. The token
//     has many writers, each writing a fresh random token after its own
//     changes: whichever lands last, a reader that read it and then listed
//     sees every change made before any token write it was ordered after.
//  4. Names as identities? An entry's file holds its content; the caller
//     checks it against the name it derives (Entry.Data).
package versioned

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// TokenName is the version file in a Dir; entries are the other files
// ending in ".json".
const TokenName = "version"

// Dir is one directory of entries under its version token.
type Dir struct {
	FS   volume.FS
	Path string
}

// Entry is one stored entry.
type Entry struct {
	Name string
	Data []byte
}

// Change is one entry to write (Data set) or remove (Data nil).
type Change struct {
	Name string
	Data []byte
}

// Apply makes every change, then writes a new token, and returns it. The
// names must end in ".json" and be plain file names.
func (d Dir) Apply(changes []Change) (string, error) {
	if err := volume.MkdirAllSync(d.FS, d.Path); err != nil {
		return "", fmt.Errorf("create %s: %w", d.Path, err)
	}
	removed := false
	for _, c := range changes {
		if !entryName(c.Name) {
			return "", fmt.Errorf("%s: %q is not an entry name", d.Path, c.Name)
		}
		p := path.Join(d.Path, c.Name)
		if c.Data != nil {
			if err := volume.WriteFileAtomic(d.FS, p, c.Data); err != nil {
				return "", fmt.Errorf("write %s: %w", p, err)
			}
			continue
		}
		switch err := d.FS.Remove(p); {
		case err == nil:
			removed = true
		case !errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("remove %s: %w", p, err)
		}
	}
	if removed {
		if err := d.FS.SyncDir(d.Path); err != nil {
			return "", fmt.Errorf("sync %s: %w", d.Path, err)
		}
	}
	return d.bump()
}

func (d Dir) bump() (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	if err := volume.WriteFileAtomic(d.FS, path.Join(d.Path, TokenName), []byte(tok)); err != nil {
		return "", fmt.Errorf("write the version of %s: %w", d.Path, err)
	}
	return tok, nil
}

// Token reads the current token; "" when nothing was ever written.
func (d Dir) Token() (string, error) {
	b, err := volume.ReadFile(d.FS, path.Join(d.Path, TokenName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the version of %s: %w", d.Path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Load reads the token and then every entry, sorted by name. An entry
// removed between the listing and its read is left out.
func (d Dir) Load() (string, []Entry, error) {
	tok, err := d.Token()
	if err != nil {
		return "", nil, err
	}
	des, err := d.FS.ReadDir(d.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return tok, nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("list %s: %w", d.Path, err)
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		if !entryName(de.Name()) {
			continue
		}
		b, err := volume.ReadFile(d.FS, path.Join(d.Path, de.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("read %s: %w", path.Join(d.Path, de.Name()), err)
		}
		out = append(out, Entry{Name: de.Name(), Data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return tok, out, nil
}

func entryName(n string) bool {
	return strings.HasSuffix(n, ".json") && !strings.ContainsRune(n, '/') && !volume.IsTempName(n) && n != ".json"
}

// Reader keeps what a Dir held at its last load and reloads when the token
// changes, and every FullEvery polls regardless (the bound on a change
// whose token write was lost to a crash).
type Reader struct {
	Dir       Dir
	FullEvery int

	polls  int
	loaded bool
	token  string
}

// Poll reads the token and, when it changed (or a full reload is due, or
// nothing is loaded yet), the entries. reload is false when what was
// loaded before still holds; entries is then nil.
func (r *Reader) Poll() (entries []Entry, reload bool, err error) {
	r.polls++
	full := !r.loaded || (r.FullEvery > 0 && r.polls%r.FullEvery == 0)
	if !full {
		tok, err := r.Dir.Token()
		if err != nil {
			return nil, false, err
		}
		if tok == r.token {
			return nil, false, nil
		}
	}
	tok, entries, err := r.Dir.Load()
	if err != nil {
		return nil, false, err
	}
	r.loaded, r.token = true, tok
	return entries, true, nil
}

// Token is the token of the last load ("" before any, or when the Dir has
// none).
func (r *Reader) Token() string { return r.token }

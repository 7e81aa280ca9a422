package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// UsersDir is where credentials live under the cluster directory: one file
// a user and mechanism, written whole by the atomic write (docs/volume.md,
// "Credentials"). Every broker reads the same files.
const UsersDir = "users"

// CredentialPath is the file of user's credential for m:
// users/<escaped user>.<mechanism>.json, shortened by volume.FitName when
// that would not fit a name; the file names its user and mechanism, so a
// shortened name is checked when it is read.
func CredentialPath(clusterDir, user string, m Mechanism) string {
	return path.Join(clusterDir, UsersDir, volume.FitName(url.PathEscape(user)+"."+m.Name, ".json"))
}

// SaveCredential writes c, replacing the user's credential for its
// mechanism.
func SaveCredential(fsys volume.FS, clusterDir string, c Credential) error {
	m, ok := MechanismNamed(c.Mechanism)
	if !ok {
		return fmt.Errorf("%w: mechanism %q", ErrInvalidCredential, c.Mechanism)
	}
	if c.User == "" || len(c.Salt) == 0 || len(c.StoredKey) != m.size || len(c.ServerKey) != m.size ||
		c.Iterations < MinIterations || c.Iterations > MaxIterations {
		return fmt.Errorf("%w: credential of %q for %s", ErrInvalidCredential, c.User, c.Mechanism)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := volume.MkdirAllSync(fsys, path.Join(clusterDir, UsersDir)); err != nil {
		return err
	}
	if err := volume.WriteFileAtomic(fsys, CredentialPath(clusterDir, c.User, m), b); err != nil {
		return fmt.Errorf("save the %s credential of %q: %w", m.Name, c.User, err)
	}
	return nil
}

// LoadCredential reads user's credential for m; ok is false when there is
// none.
func LoadCredential(fsys volume.FS, clusterDir, user string, m Mechanism) (c Credential, ok bool, err error) {
	b, err := volume.ReadFile(fsys, CredentialPath(clusterDir, user, m))
	if errors.Is(err, fs.ErrNotExist) {
		return Credential{}, false, nil
	}
	if err != nil {
		return Credential{}, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Credential{}, false, fmt.Errorf("credential of %q for %s: %w", user, m.Name, err)
	}
	if c.User != user || c.Mechanism != m.Name {
		return Credential{}, false, nil // another user's file under a shortened name
	}
	return c, true, nil
}

// DeleteCredential removes user's credential for m; existed is false when
// there was none.
func DeleteCredential(fsys volume.FS, clusterDir, user string, m Mechanism) (existed bool, err error) {
	if _, ok, err := LoadCredential(fsys, clusterDir, user, m); err != nil || !ok {
		return false, err
	}
	p := CredentialPath(clusterDir, user, m)
	if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("delete the %s credential of %q: %w", m.Name, user, err)
	}
	if err := fsys.SyncDir(path.Dir(p)); err != nil {
		return true, fmt.Errorf("delete the %s credential of %q: %w", m.Name, user, err)
	}
	return true, nil
}

// ListCredentials reads every stored credential, sorted by user and then
// mechanism. Files a crashed write left behind are skipped.
func ListCredentials(fsys volume.FS, clusterDir string) ([]Credential, error) {
	dir := path.Join(clusterDir, UsersDir)
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Credential
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || volume.IsTempName(name) {
			continue
		}
		b, err := volume.ReadFile(fsys, path.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		var c Credential
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("credential file %s: %w", name, err)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Mechanism < out[j].Mechanism
	})
	return out, nil
}

// StoreLookup looks credentials up in the store under clusterDir.
func StoreLookup(fsys volume.FS, clusterDir string) Lookup {
	return func(user string, m Mechanism) (Credential, bool, error) {
		return LoadCredential(fsys, clusterDir, user, m)
	}
}

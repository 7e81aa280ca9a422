package desired

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/kaas-dev/kaas/volume"
)

// The desired state's version: <cluster>/topics/version holds a random
// token that every change to a spec replaces after it is made (Write,
// Create and RemoveTopicSpec do it themselves, so the operator and kaasctl
// bump it too). A broker reads the token each round, one small file, and
// lists the specs only when it changed, so what it reads at idle does not
// grow with the topics.
//
// The four questions: the token is one atomic write after the spec's own
// (a crash between leaves the spec changed and the token old: readers
// see the change at their next full listing, at most a minute later, or
// with the next bump); every change ends with a fresh token, so re-driving
// a change bumps again; many writers, each writing a fresh token after its
// own change, so a reader that read a token and then listed sees every
// change ordered before any token write; the token names nothing.

// VersionFile is the token's file name in SpecsDir (no ".json": it is
// not a spec).
const VersionFile = "version"

// BumpVersion writes a fresh token.
func BumpVersion(fsys volume.FS, clusterDir string) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if err := volume.WriteFileAtomic(fsys, path.Join(clusterDir, SpecsDir, VersionFile), []byte(hex.EncodeToString(b[:]))); err != nil {
		return fmt.Errorf("bump the desired topics' version: %w", err)
	}
	return nil
}

// ReadVersion reads the token; "" when no change has written one.
func ReadVersion(fsys volume.FS, clusterDir string) (string, error) {
	b, err := volume.ReadFile(fsys, path.Join(clusterDir, SpecsDir, VersionFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the desired topics' version: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

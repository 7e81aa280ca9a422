package sasl

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/kaas-dev/kaas/engine/auth"
)

// JWKSFile is the OAUTHBEARER key set of a JWKS file (Config.Keys),
// re-read when the file changes (its modification time or size), looked
// at no more often than every CheckEvery: an identity provider's keys
// rotate by rewriting the file (a mounted ConfigMap or Secret), with no
// restart. A new file that does not read or parse is logged and the keys
// loaded before are kept.
type JWKSFile struct {
	cfg JWKSFileConfig

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	keys    auth.KeySet
}

// JWKSFileConfig names the file and how often it is looked at.
type JWKSFileConfig struct {
	Path string
	// CheckEvery bounds how often Keys looks at the file (default 1 s).
	CheckEvery time.Duration
	Now        func() time.Time
	Logger     logr.Logger
}

// LoadJWKSFile reads the file once; it fails when the file does not load,
// so that a broker does not start unable to verify any token.
func LoadJWKSFile(cfg JWKSFileConfig) (*JWKSFile, error) {
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	j := &JWKSFile{cfg: cfg}
	if err := j.load(); err != nil {
		return nil, err
	}
	j.checked = cfg.Now()
	return j, nil
}

// Keys is the key set as last loaded, first re-read if the file changed
// and CheckEvery has passed since the last look.
func (j *JWKSFile) Keys() auth.KeySet {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.cfg.Now()
	if now.Sub(j.checked) < j.cfg.CheckEvery {
		return j.keys
	}
	j.checked = now
	st, err := os.Stat(j.cfg.Path)
	if err != nil {
		j.cfg.Logger.Error(err, "JWKS file not readable; verifying tokens with the keys loaded before", "file", j.cfg.Path)
		return j.keys
	}
	if st.ModTime().Equal(j.mod) && st.Size() == j.size {
		return j.keys
	}
	if err := j.load(); err != nil {
		j.cfg.Logger.Error(err, "new JWKS file does not load; verifying tokens with the keys loaded before", "file", j.cfg.Path)
		return j.keys
	}
	j.cfg.Logger.Info("JWKS file reloaded", "file", j.cfg.Path)
	return j.keys
}

// load reads and parses the file; on failure nothing changes. The stamp
// is taken before the read, so a write during it is seen next time.
func (j *JWKSFile) load() error {
	st, err := os.Stat(j.cfg.Path)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	b, err := os.ReadFile(j.cfg.Path)
	if err != nil {
		return fmt.Errorf("JWKS file: %w", err)
	}
	ks, err := auth.ParseJWKS(b)
	if err != nil {
		return fmt.Errorf("JWKS file %s: %w", j.cfg.Path, err)
	}
	j.keys, j.mod, j.size = ks, st.ModTime(), st.Size()
	return nil
}

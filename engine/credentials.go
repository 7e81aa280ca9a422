package engine

import "github.com/kaas-dev/kaas/engine/auth"

// The SCRAM credentials of the cluster, in the store engine/auth keeps
// under the cluster directory on the control-plane volume: the files
// kaasctl users writes, and the ones every broker's SASL listeners read.

// ListCredentials reads every stored SCRAM credential, sorted by user and
// then mechanism.
func (e *Engine) ListCredentials() ([]auth.Credential, error) {
	return auth.ListCredentials(e.fsys, e.cfg.ClusterDir)
}

// LoadCredential reads user's credential for m; ok is false when there is
// none.
func (e *Engine) LoadCredential(user string, m auth.Mechanism) (c auth.Credential, ok bool, err error) {
	return auth.LoadCredential(e.fsys, e.cfg.ClusterDir, user, m)
}

// SaveCredential writes c with the atomic write, replacing the user's
// credential for its mechanism.
func (e *Engine) SaveCredential(c auth.Credential) error {
	return auth.SaveCredential(e.fsys, e.cfg.ClusterDir, c)
}

// DeleteCredential removes user's credential for m; existed is false when
// there was none.
func (e *Engine) DeleteCredential(user string, m auth.Mechanism) (existed bool, err error) {
	return auth.DeleteCredential(e.fsys, e.cfg.ClusterDir, user, m)
}

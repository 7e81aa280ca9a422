package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/kaas-dev/kaas/engine/acl"
	"github.com/kaas-dev/kaas/engine/versioned"
)

// ACLConfig turns the authorizer on and says what it decides with besides
// the stored ACLs (Kafka's super.users and
// allow.everyone.if.no.acl.found).
type ACLConfig struct {
	Enabled      bool
	SuperUsers   []string // principals, "User:admin"
	AllowIfNoACL bool
}

// aclState is the authorizer: the ACLs as this broker last loaded them.
type aclState struct {
	store *syncedStore
	index atomic.Pointer[acl.Index]
}

func (e *Engine) initACLs() {
	if !e.cfg.ACLs.Enabled {
		return
	}
	cfg := acl.Config{SuperUsers: e.cfg.ACLs.SuperUsers, AllowIfNoACL: e.cfg.ACLs.AllowIfNoACL}
	e.acls.index.Store(acl.New(nil, cfg))
	e.acls.store = e.newSyncedStore(acl.Dir, func(entries []versioned.Entry) {
		bindings, bad := acl.DecodeAll(entries)
		for _, err := range bad {
			e.log.Error(err, "an ACL file is left out")
		}
		e.acls.index.Store(acl.New(bindings, cfg))
	})
	// Loaded before the broker serves anything; a failed read leaves no
	// ACL loaded (everyone but super users refused) until the next round.
	e.pollStore(e.acls.store)
}

// Authorizer is the index every request is checked against; nil when
// ACLs are off.
func (e *Engine) Authorizer() *acl.Index { return e.acls.index.Load() }

// ErrACLsDisabled answers the ACL APIs of a broker without an authorizer
// (Kafka's SECURITY_DISABLED).
var ErrACLsDisabled = fmt.Errorf("no authorizer is configured on this broker (start it with --authorizer acl)")

// CreateACLs stores bindings (each already valid; one already stored is
// kept as it is) and returns once every live broker enforces them, or
// after a bounded wait (syncedStore).
func (e *Engine) CreateACLs(ctx context.Context, bindings []acl.Binding) error {
	if e.acls.store == nil {
		return ErrACLsDisabled
	}
	changes := make([]versioned.Change, 0, len(bindings))
	for _, b := range bindings {
		changes = append(changes, versioned.Change{Name: acl.FileName(b), Data: acl.Encode(b)})
	}
	return e.changeStore(ctx, e.acls.store, changes)
}

// DeleteACLs removes every stored binding that a filter matches and
// returns, by filter, the bindings it matched. It reads the store afresh,
// so a binding another broker stored an instant ago is matched too.
func (e *Engine) DeleteACLs(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	if e.acls.store == nil {
		return nil, ErrACLsDisabled
	}
	_, entries, err := e.acls.store.dir.Load()
	if err != nil {
		return nil, fmt.Errorf("read the ACLs: %w", err)
	}
	stored, _ := acl.DecodeAll(entries)
	matched := make([][]acl.Binding, len(filters))
	var changes []versioned.Change
	seen := map[string]bool{}
	for i, f := range filters {
		for _, b := range stored {
			if !f.Matches(b) {
				continue
			}
			matched[i] = append(matched[i], b)
			if n := acl.FileName(b); !seen[n] {
				seen[n] = true
				changes = append(changes, versioned.Change{Name: n})
			}
		}
	}
	if len(changes) == 0 {
		return matched, nil
	}
	return matched, e.changeStore(ctx, e.acls.store, changes)
}

// DescribeACLs returns the bindings f matches, as this broker enforces
// them.
func (e *Engine) DescribeACLs(f acl.Filter) ([]acl.Binding, error) {
	ix := e.Authorizer()
	if ix == nil {
		return nil, ErrACLsDisabled
	}
	return ix.Bindings(f), nil
}

// pollStores reloads the synced stores whose token changed.
func (e *Engine) pollStores() {
	if e.acls.store != nil {
		e.pollStore(e.acls.store)
	}
	if e.quotas.store != nil {
		e.pollStore(e.quotas.store)
	}
}

package wire

// AlterClientQuotas: versions 0-1.
//
// Behavior:
// * Sets or removes (Remove) client quotas, each entry on one entity
//   (user, client-id, or both; a null name is the default entity), in the
//   store every broker enforces (engine/quota); answers once every live
//   broker loaded the change, or after a bounded wait.
// * Each entry is checked on its own and answered with its own error: an
//   invalid entity (empty, a type twice, an unknown type, ip, which kaas
//   does not keep, or ip with user or client-id), an unknown or
//   unsupported key, or a value Kafka refuses (byte rates whole and
//   positive, request_percentage positive) is INVALID_REQUEST with a
//   message, and nothing of that entry is applied. Of two ops on one key
//   the later wins.
// * ValidateOnly checks and answers without applying anything.
// * The valid entries are applied in one change; a store that cannot be
//   written answers each of them with that error.
// * Needs ALTER_CONFIGS on the cluster (Kafka's), else every entry is
//   CLUSTER_AUTHORIZATION_FAILED with a message.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine"
	"github.com/kaas-dev/kaas/engine/quota"
)

func handleAlterClientQuotas(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, en := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, ent := range en.Entity {
			re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: ent.Type, Name: ent.Name})
		}
		resp.Entries = append(resp.Entries, re)
	}
	setErr := func(i int, code int16, msg string) {
		resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code, &msg
	}
	if !c.allowedCluster(kmsg.ACLOperationAlterConfigs) {
		for i := range resp.Entries {
			setErr(i, kerr.ClusterAuthorizationFailed.Code, clusterDenied(kmsg.ACLOperationAlterConfigs))
		}
		r.finish(resp)
		return
	}
	var changes []engine.QuotaChange
	var applied []int
	for i, en := range req.Entries {
		ch, err := quotaChangesOf(en)
		if err != nil {
			setErr(i, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		changes = append(changes, ch...)
		applied = append(applied, i)
	}
	if req.ValidateOnly || len(changes) == 0 {
		r.finish(resp)
		return
	}
	c.async(r, func() {
		if err := c.s.eng.AlterClientQuotas(c.ctx, changes); err != nil {
			for _, i := range applied {
				setErr(i, errorCode(err), err.Error())
			}
		}
		r.finish(resp)
	})
}

// quotaChangesOf checks one entry and returns its changes.
func quotaChangesOf(en kmsg.AlterClientQuotasRequestEntry) ([]engine.QuotaChange, error) {
	comps := make([]quota.Component, 0, len(en.Entity))
	for _, e := range en.Entity {
		comps = append(comps, quota.Component{Type: e.Type, Name: e.Name})
	}
	ent, err := quota.EntityOf(comps)
	if err != nil {
		return nil, err
	}
	out := make([]engine.QuotaChange, 0, len(en.Ops))
	for _, op := range en.Ops {
		k, err := quota.ParseKey(op.Key)
		if err != nil {
			return nil, err
		}
		if !op.Remove {
			if err := quota.ValidateValue(k, op.Value); err != nil {
				return nil, err
			}
		}
		out = append(out, engine.QuotaChange{Entity: ent, Key: k, Value: op.Value, Remove: op.Remove})
	}
	return out, nil
}

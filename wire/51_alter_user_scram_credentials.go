package wire

// AlterUserScramCredentials: versions 0-0.
//
// Behavior:
// * Upsertions carry what the client derived from the password (salt,
//   salted password = PBKDF2 of it, iterations); kaas keeps the stored and
//   server keys, never the salted password, in the credential files
//   kaasctl users writes, one atomic write a user and mechanism, under the
//   cluster directory. Every broker reads the same files, so a credential
//   works on all of them as soon as it is answered.
// * As in Kafka's controller, a user is altered at most once a request: a
//   user named again (in deletions or upsertions) is DUPLICATE_RESOURCE
//   and none of its alterations happen. An empty user name is
//   UNACCEPTABLE_CREDENTIAL, a mechanism other than 1 (SCRAM-SHA-256) or 2
//   (SCRAM-SHA-512) UNSUPPORTED_SASL_MECHANISM, iterations outside
//   4096-16384, an empty salt or a salted password of the wrong length
//   UNACCEPTABLE_CREDENTIAL, deleting a credential that does not exist
//   RESOURCE_NOT_FOUND; each with a message. Other users' alterations are
//   done.
// * One result a user, in the order users first appear (deletions, then
//   upsertions). More than 1000 alterations in one request are all
//   INVALID_REQUEST and nothing is written.
// * Authorization (Kafka's): ALTER on the cluster, else every user of the
//   request is CLUSTER_AUTHORIZATION_FAILED, with a message.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/auth"
)

func handleAlterUserScramCredentials(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	c.async(r, func() {
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		if !c.allowedCluster(kmsg.ACLOperationAlter) {
			resp.Results = refusedScramAlterations(req, clusterDeniedError(kmsg.ACLOperationAlter))
			r.finish(resp)
			return
		}
		resp.Results = alterScramCredentials(req, c.s.eng)
		r.finish(resp)
	})
}

// credentialStore is what AlterUserScramCredentials needs of the engine.
type credentialStore interface {
	LoadCredential(user string, m auth.Mechanism) (auth.Credential, bool, error)
	SaveCredential(c auth.Credential) error
	DeleteCredential(user string, m auth.Mechanism) (bool, error)
}

// scramAlteration is the one alteration a request makes to a user.
type scramAlteration struct {
	user   string
	delete *kmsg.AlterUserSCRAMCredentialsRequestDeletion
	upsert *kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	err    error // set when the alteration is refused
}

func alterScramCredentials(req *kmsg.AlterUserSCRAMCredentialsRequest, store credentialStore) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	alts := collectScramAlterations(req)
	if n := len(req.Deletions) + len(req.Upsertions); n > maxScramUsers {
		tooMany := &codedError{code: kerr.InvalidRequest.Code,
			err: fmt.Errorf("a request makes at most %d alterations, this one makes %d", maxScramUsers, n)}
		for _, a := range alts {
			a.err = tooMany
		}
	}
	out := make([]kmsg.AlterUserSCRAMCredentialsResponseResult, 0, len(alts))
	for _, a := range alts {
		if a.err == nil {
			a.err = applyScramAlteration(a, store)
		}
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = a.user
		if a.err != nil {
			res.ErrorCode = errorCode(a.err)
			msg := a.err.Error()
			res.ErrorMessage = &msg
		}
		out = append(out, res)
	}
	return out
}

// collectScramAlterations pairs each user with its one alteration, in the
// order users first appear; a user altered twice is refused.
func collectScramAlterations(req *kmsg.AlterUserSCRAMCredentialsRequest) []*scramAlteration {
	var alts []*scramAlteration
	byUser := map[string]*scramAlteration{}
	add := func(user string) *scramAlteration {
		if a, ok := byUser[user]; ok {
			a.delete, a.upsert = nil, nil
			a.err = kafkaRefusal(kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
			return nil
		}
		a := &scramAlteration{user: user}
		byUser[user] = a
		alts = append(alts, a)
		return a
	}
	for i := range req.Deletions {
		if a := add(req.Deletions[i].Name); a != nil {
			a.delete = &req.Deletions[i]
		}
	}
	for i := range req.Upsertions {
		if a := add(req.Upsertions[i].Name); a != nil {
			a.upsert = &req.Upsertions[i]
		}
	}
	return alts
}

// applyScramAlteration validates a and makes it.
func applyScramAlteration(a *scramAlteration, store credentialStore) error {
	var typ int8
	if a.delete != nil {
		typ = a.delete.Mechanism
	} else {
		typ = a.upsert.Mechanism
	}
	if a.user == "" {
		return kafkaRefusal(kerr.UnacceptableCredential.Code, "Username must not be empty")
	}
	m, ok := scramMechanismOf(typ)
	if !ok {
		return kafkaRefusal(kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("Unknown SCRAM mechanism %d", typ))
	}
	if d := a.delete; d != nil {
		existed, err := store.DeleteCredential(a.user, m)
		if err != nil {
			return fmt.Errorf("delete the %s credential of %s: %w", m.Name, a.user, err)
		}
		if !existed {
			return kafkaRefusal(kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
		}
		return nil
	}
	u := a.upsert
	switch { // Kafka checks the bounds before anything else of the credential
	case u.Iterations < auth.MinIterations:
		return kafkaRefusal(kerr.UnacceptableCredential.Code, fmt.Sprintf("Too few iterations: %d, at least %d", u.Iterations, auth.MinIterations))
	case u.Iterations > auth.MaxIterations:
		return kafkaRefusal(kerr.UnacceptableCredential.Code, fmt.Sprintf("Too many iterations: %d, at most %d", u.Iterations, auth.MaxIterations))
	}
	cred, err := m.FromSaltedPassword(a.user, u.Salt, u.SaltedPassword, int(u.Iterations))
	if err != nil {
		return &codedError{code: kerr.UnacceptableCredential.Code, err: err}
	}
	return store.SaveCredential(cred) // its error names the user and mechanism
}

// refusedScramAlterations answers every user of the request err.
func refusedScramAlterations(req *kmsg.AlterUserSCRAMCredentialsRequest, err error) []kmsg.AlterUserSCRAMCredentialsResponseResult {
	alts := collectScramAlterations(req)
	out := make([]kmsg.AlterUserSCRAMCredentialsResponseResult, 0, len(alts))
	for _, a := range alts {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = a.user, errorCode(err), errMessage(err)
		out = append(out, res)
	}
	return out
}

package engine

import "github.com/kaas-dev/kaas/engine/quota"

// ClientQuota is the quota k of a client: the limit, and the sensor, the
// name of the entity the limit was found on (every client that entity
// matches shares one measured rate, as in Kafka); ok is false when no
// quota k applies to the client. user is the principal's name without
// its type ("alice" for User:alice).
func (e *Engine) ClientQuota(k quota.Key, user, clientID string) (limit float64, sensor string, ok bool) {
	return 0, "", false
}

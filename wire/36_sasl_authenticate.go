package wire

// SaslAuthenticate: versions 0-2.
//
// Behavior:
// * Carries one message of the exchange SaslHandshake began (engine/auth
//   checks it: SCRAM-SHA-256/512 and PLAIN against the stored SCRAM
//   credentials, OAUTHBEARER against the token keys).
// * A failed exchange is answered SASL_AUTHENTICATION_FAILED with one
//   message whatever went wrong (an unknown user reads as a wrong
//   password), held back 100 ms, and the connection closes.
// * Before it succeeds, only ApiVersions, SaslHandshake and
//   SaslAuthenticate are served, frames are bounded at 512 KiB, and any
//   other request closes the connection.
//
// Version notes:
// * v1: SessionLifetimeMillis, the session's remaining lifetime (the
//   token's expiry, bounded by connections.max.reauth.ms); a session that
//   outlives it without re-authenticating is closed at its next request.
// * v2: flexible

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failedAuthDelay is how long a failed authentication's answer waits
// before the connection closes (Kafka's
// connection.failed.authentication.delay.ms): a client retrying a wrong
// password in a loop is slowed down.
const failedAuthDelay = 100 * 1e6 // 100 ms, as a time.Duration

// handleSaslAuthenticate carries one SASL message of the exchange
// SaslHandshake began. A failed exchange is answered
// SASL_AUTHENTICATION_FAILED, after failedAuthDelay, and the connection
// closes.
func handleSaslAuthenticate(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "this listener does not authenticate with SASL"
		resp.ErrorMessage = &msg
		r.finish(resp)
		return
	}
	res := c.sasl.Authenticate(req.SASLAuthBytes)
	c.countAuth(res)
	resp.ErrorCode, resp.SASLAuthBytes = res.ErrCode, res.Reply
	if res.Message != "" {
		resp.ErrorMessage = &res.Message
	}
	resp.SessionLifetimeMillis = res.Lifetime.Milliseconds()
	if res.ErrCode != 0 {
		r.closeAfter = failedAuthDelay
		c.s.log.V(1).Info("SASL authentication failed", "remote", c.nc.RemoteAddr().String(), "listener", c.listener.Name,
			"mechanism", res.Mechanism, "reason", fmt.Sprint(res.Err))
	}
	r.finish(resp)
}

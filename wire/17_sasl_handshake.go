package wire

// SaslHandshake: versions 0-1.
//
// Behavior:
// * Picks the connection's SASL mechanism among those its listener
//   enables (UNSUPPORTED_SASL_MECHANISM with the enabled list otherwise);
//   a handshake on an authenticated connection begins a re-authentication
//   (KIP-368).
// * Off a SASL listener: ILLEGAL_SASL_STATE, as Kafka answers.
//
// Version notes:
// * v0: the client's SASL messages follow as bare size-prefixed frames,
//   not SaslAuthenticate requests; a failed exchange closes the
//   connection.
// * v1: the messages go in SaslAuthenticate.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleSaslHandshake picks the connection's SASL mechanism. After v0 the
// client sends its SASL messages as bare size-prefixed frames (rawSASL);
// from v1 it wraps them in SaslAuthenticate. Off a SASL listener it is
// ILLEGAL_SASL_STATE, as Kafka answers.
func handleSaslHandshake(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if c.sasl == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		r.finish(resp)
		return
	}
	resp.ErrorCode, resp.SupportedMechanisms = c.sasl.Handshake(req.Mechanism)
	if resp.ErrorCode == 0 && req.Version == 0 {
		c.rawSASL = true
	}
	r.finish(resp)
}

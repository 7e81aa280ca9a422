package wire

import (
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
	resp.ErrorCode, resp.SASLAuthBytes = res.ErrCode, res.Reply
	if res.Message != "" {
		resp.ErrorMessage = &res.Message
	}
	resp.SessionLifetimeMillis = res.Lifetime.Milliseconds()
	if res.ErrCode != 0 {
		r.closeAfter = failedAuthDelay
	}
	r.finish(resp)
}

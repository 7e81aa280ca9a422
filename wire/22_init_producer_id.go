package wire

// InitProducerID: versions 0-5.
//
// Behavior:
// * Idempotent producers (no transactional ID) get a producer ID never
//   issued before, from a block reserved by exclusive create on the volume,
//   at epoch 0. A producer re-initialising (v3+, KIP-360) gets a new ID.
// * Transactional IDs are refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
//   until transactions are served: no coordinator is advertised for them.
//
// Version notes:
// * v2: flexible
// * v3: ProducerID and ProducerEpoch in the request (KIP-360)

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(c *conn, kreq kmsg.Request, r *reply) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		r.finish(resp)
		return
	}
	c.async(r, func() {
		id, err := c.s.eng.NextProducerID()
		if err != nil {
			c.s.log.Error(err, "issue producer id")
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
		r.finish(resp)
	})
}

package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// fencedCode is the code a transactional API of version v answers for a
// producer whose epoch is stale: PRODUCER_FENCED from the version that
// knows it (KIP-588), INVALID_PRODUCER_EPOCH before.
func fencedCode(code int16, v, fencedFrom int16) int16 {
	if code == kerr.ProducerFenced.Code && v < fencedFrom {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

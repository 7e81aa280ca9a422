package wire

// ApiVersions: versions 0-3.
//
// Behavior:
// * Answers with the handlers table (dispatch.go), so what is advertised is
//   exactly what is served.
// * A request at a version kaas does not know (clients probe with their
//   newest) is answered at v0 with UNSUPPORTED_VERSION and the table, so the
//   client can retry at a version both sides speak (KIP-511).
//
// Version notes:
// * v1: ThrottleMillis
// * v3: flexible request; the response header is never flexible
//   (KIP-511), so the client can parse it before knowing our versions.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleApiVersions(c *conn, kreq kmsg.Request, r *reply) {
	r.finish(apiVersionsResponse(kreq.GetVersion(), 0))
}

func apiVersionsResponse(version int16, code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = code
	resp.ApiKeys = apiKeys()
	return resp
}

package groups

import "context"

type clientKey struct{}

type clientInfo struct{ id, host string }

// WithClient returns ctx carrying the client ID and host of the connection
// a JoinGroup arrived on. Kafka requests do not carry them in their body,
// so package wire passes them this way; the coordinator makes member IDs
// from the client ID and shows both in DescribeGroups.
func WithClient(ctx context.Context, clientID, host string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{id: clientID, host: host})
}

func clientFrom(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci
}

package wire

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one API key. fn finishes r, now or later (via c.async).
type handler struct {
	min, max int16
	fn       func(c *conn, req kmsg.Request, r *reply)
}

// handlers is the one table of what kaas serves. ApiVersions is derived from
// it and requests outside it are refused, so the advertised versions cannot
// drift from the code.
var handlers map[kmsg.Key]handler

func init() {
	handlers = map[kmsg.Key]handler{
		kmsg.Produce:              {3, 9, handleProduce},
		kmsg.Fetch:                {4, 15, handleFetch},
		kmsg.ListOffsets:          {1, 7, handleListOffsets},
		kmsg.Metadata:             {0, 12, handleMetadata},
		kmsg.ApiVersions:          {0, 3, handleApiVersions},
		kmsg.SASLHandshake:        {0, 1, handleSaslHandshake},
		kmsg.SASLAuthenticate:     {0, 2, handleSaslAuthenticate},
		kmsg.CreateTopics:         {2, 7, handleCreateTopics},
		kmsg.DeleteTopics:         {1, 6, handleDeleteTopics},
		kmsg.InitProducerID:       {0, 5, handleInitProducerID},
		kmsg.OffsetForLeaderEpoch: {2, 4, handleOffsetForLeaderEpoch},
		kmsg.DescribeCluster:      {0, 1, handleDescribeCluster},
		kmsg.OffsetCommit:         {2, 10, handleOffsetCommit},
		kmsg.OffsetFetch:          {1, 8, handleOffsetFetch},
		kmsg.FindCoordinator:      {0, 4, handleFindCoordinator},
		kmsg.JoinGroup:            {0, 9, handleJoinGroup},
		kmsg.Heartbeat:            {0, 4, handleHeartbeat},
		kmsg.LeaveGroup:           {0, 5, handleLeaveGroup},
		kmsg.SyncGroup:            {0, 5, handleSyncGroup},
		kmsg.DescribeGroups:       {0, 5, handleDescribeGroups},
		kmsg.ListGroups:           {0, 4, handleListGroups},
		kmsg.DeleteGroups:         {0, 2, handleDeleteGroups},
		kmsg.OffsetDelete:         {0, 0, handleOffsetDelete},
		kmsg.AddPartitionsToTxn:   {0, 5, handleAddPartitionsToTxn},
		kmsg.AddOffsetsToTxn:      {0, 4, handleAddOffsetsToTxn},
		kmsg.EndTxn:               {0, 4, handleEndTxn},
		kmsg.WriteTxnMarkers:      {0, 1, handleWriteTxnMarkers},
		kmsg.TxnOffsetCommit:      {0, 5, handleTxnOffsetCommit},
		kmsg.DescribeProducers:    {0, 0, handleDescribeProducers},
		kmsg.DescribeTransactions: {0, 0, handleDescribeTransactions},
		kmsg.ListTransactions:     {0, 1, handleListTransactions},

		// Admin APIs on live topics and broker configs.
		kmsg.DeleteRecords:           {0, 2, handleDeleteRecords},
		kmsg.DescribeConfigs:         {1, 4, handleDescribeConfigs},
		kmsg.AlterConfigs:            {0, 2, handleAlterConfigs},
		kmsg.CreatePartitions:        {0, 3, handleCreatePartitions},
		kmsg.IncrementalAlterConfigs: {0, 1, handleIncrementalAlterConfigs},
		kmsg.DescribeLogDirs:         {0, 4, handleDescribeLogDirs},

		// SCRAM credentials, in the store kaasctl users writes.
		kmsg.DescribeUserSCRAMCredentials: {0, 0, handleDescribeUserScramCredentials},
		kmsg.AlterUserSCRAMCredentials:    {0, 0, handleAlterUserScramCredentials},

		// ACLs, in the store every broker's authorizer loads.
		kmsg.DescribeACLs: {0, 3, handleDescribeAcls},
		kmsg.CreateACLs:   {0, 3, handleCreateAcls},
		kmsg.DeleteACLs:   {0, 3, handleDeleteAcls},

		// Client quotas, in the store every broker enforces.
		kmsg.DescribeClientQuotas: {0, 1, handleDescribeClientQuotas},
		kmsg.AlterClientQuotas:    {0, 1, handleAlterClientQuotas},
	}
}

// apiKeys lists the table sorted by key.
func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(handlers))
	for k, h := range handlers {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(k), h.min, h.max
		out = append(out, ak)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}

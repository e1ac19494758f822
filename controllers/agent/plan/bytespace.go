package plan

import (
	"time"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// Progress fine enough to watch: the pace of writes whose only news is
// the bytes of pulls under way follows how many nodes pull fleet-wide.
const (
	// FastBytesPace is the quickest a node writes bytes alone: a person
	// watching a small warm sees its bars move every couple of seconds.
	FastBytesPace = 2 * time.Second
	// BytesPacePerNode is what each pulling node adds to every node's
	// pace: the fleet's writes of bytes alone stay under one per
	// BytesPacePerNode (ten a second), until the slowest pace (the
	// agent's --pull-progress-interval, 30 s: 300 nodes) takes over, as
	// before, for larger fleets.
	BytesPacePerNode = 100 * time.Millisecond
)

// BytesPace is how long a node waits between two writes of bytes alone,
// given fleetPulling, the nodes pulling over the fleet as the agent
// knows them, and slowest, the agent's --pull-progress-interval: between
// FastBytesPace and slowest, slower as more nodes pull. 0 (no write of
// bytes alone) stays 0.
func BytesPace(fleetPulling int64, slowest time.Duration) time.Duration {
	if slowest <= 0 {
		return 0
	}
	pace := time.Duration(max(fleetPulling, 0)) * BytesPacePerNode
	return min(max(pace, FastBytesPace), slowest)
}

// FleetPulling is how many nodes pull over the fleet as the ImageWarms'
// status counts them (status.nodes.pulling, summed: a node pulling for
// two ImageWarms counts twice, which only slows the pace). The agent
// reads it from the ImageWarms it caches, at no cost to the API server.
func FleetPulling(warms []warmv1.ImageWarm) int64 {
	var n int64
	for i := range warms {
		n += int64(max(warms[i].Status.Nodes.Pulling, 0))
	}
	return n
}

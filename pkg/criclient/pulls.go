package criclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"google.golang.org/grpc/metadata"
)

// containerd opens a lease as a pull starts, before it asks the registry
// for anything, and ends it once the image is unpacked. On containerd 2.x
// that is the only sign of a pull waiting for its turn: the CRI plugin
// downloads at most three blobs at a time across all pulls, so the
// kubelet's pull beside three of warmer's writes nothing until one of
// theirs ends. OthersPulls lists those leases; to tell warmer's own pulls
// apart, PullImage names the lease its pull runs in (containerd takes a
// lease from the gRPC header containerd-lease, and creates none then).

const (
	// ownLeasePrefix begins the name of every lease warmer creates.
	ownLeasePrefix = "warmer-"
	// leaseHeader is the gRPC metadata key containerd takes a request's
	// lease from.
	leaseHeader = "containerd-lease"
	// pullLeaseFor bounds a pull's lease, should the agent stop before it
	// ends it: containerd's own pull leases last a day.
	pullLeaseFor = 24 * time.Hour
)

// OthersPulls returns when each pull made by another client (the
// kubelet's) that is under way in the runtime started: the creation times
// of the leases that are not warmer's and expire, as those of pulls do
// (a sandbox's lease does not expire; a container's expires, but ends
// within milliseconds).
func (s *ContentStore) OthersPulls(ctx context.Context) ([]time.Time, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.leases.List(ctx, &leasesapi.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing the runtime's leases: %w", err)
	}
	var out []time.Time
	for _, l := range resp.GetLeases() {
		if strings.HasPrefix(l.GetID(), ownLeasePrefix) || l.GetLabels()[expireLabel] == "" {
			continue
		}
		out = append(out, asTime(l.GetCreatedAt()))
	}
	return out, nil
}

// inOwnLease returns ctx with a lease of warmer's own for a pull to run
// in, on containerd, and the function that ends it. Without a lease (not
// containerd, or it could not be created) the pull runs in containerd's.
func (c *Client) inOwnLease(ctx context.Context) (context.Context, func()) {
	if c.version.GetRuntimeName() != "containerd" {
		return ctx, func() {}
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := ownLeasePrefix + "pull-" + hex.EncodeToString(b[:])
	leases := leasesapi.NewLeasesClient(c.conn)
	call := func() (context.Context, context.CancelFunc) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		return metadata.AppendToOutgoingContext(cctx, namespaceHeader, criNamespace), cancel
	}
	cctx, cancel := call()
	defer cancel()
	until := time.Now().Add(pullLeaseFor).UTC().Format(time.RFC3339)
	if _, err := leases.Create(cctx, &leasesapi.CreateRequest{ID: id, Labels: map[string]string{expireLabel: until}}); err != nil {
		return ctx, func() {}
	}
	return metadata.AppendToOutgoingContext(ctx, leaseHeader, id), func() {
		cctx, cancel := call()
		defer cancel()
		_, _ = leases.Delete(cctx, &leasesapi.DeleteRequest{ID: id})
	}
}

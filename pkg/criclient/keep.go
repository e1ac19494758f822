package criclient

import (
	"context"
	"fmt"
	"time"

	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A pull cancelled midway leaves its blobs' partial writes (ingests) in
// containerd's content store, and a later pull of the same blob resumes
// from them, asking the registry for the rest only. But the cancelled
// pull's lease ends with it, and containerd's garbage collection, run
// after the next pull's changes, then removes every ingest no lease
// holds: on the test bed the bytes were gone within a second and fetched
// again. The same goes for the blobs such a pull had fetched in full but
// not yet unpacked into an image: its lease was all that held them. Keep
// holds both in a lease of warmer's own until the pull resumes, or the
// lease expires.

// expireLabel is the lease label after which containerd's garbage
// collection no longer honours the lease.
const expireLabel = "containerd.io/gc.expire"

// Lease resource types: an ingest, and a blob held in full.
const (
	ingestResource  = "ingests"
	contentResource = "content"
)

// Keep holds the ingests named by refs (Ingest.Ref) and the blobs named
// by digests in lease id, created if need be and honoured until until, so
// that garbage collection leaves them for a pull that resumes them. The
// store only reads, except for this lease.
func (s *ContentStore) Keep(ctx context.Context, id string, refs, digests []string, until time.Time) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	_, err := s.leases.Create(ctx, &leasesapi.CreateRequest{ID: id, Labels: map[string]string{expireLabel: until.UTC().Format(time.RFC3339)}})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("creating lease %s: %w", id, err)
	}
	for _, ref := range refs {
		_, err := s.leases.AddResource(ctx, &leasesapi.AddResourceRequest{ID: id, Resource: &leasesapi.Resource{ID: ref, Type: ingestResource}})
		if err != nil {
			return fmt.Errorf("holding ingest %s in lease %s: %w", ref, id, err)
		}
	}
	for _, d := range digests {
		_, err := s.leases.AddResource(ctx, &leasesapi.AddResourceRequest{ID: id, Resource: &leasesapi.Resource{ID: d, Type: contentResource}})
		if err != nil {
			return fmt.Errorf("holding blob %s in lease %s: %w", d, id, err)
		}
	}
	return nil
}

// Release ends lease id: what it held is left to the pulls writing or
// using it, or to garbage collection. A lease already gone is no error.
func (s *ContentStore) Release(ctx context.Context, id string) error {
	ctx, cancel := s.call(ctx)
	defer cancel()
	if _, err := s.leases.Delete(ctx, &leasesapi.DeleteRequest{ID: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("deleting lease %s: %w", id, err)
	}
	return nil
}

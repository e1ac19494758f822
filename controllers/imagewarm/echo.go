package imagewarm

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// ownWrites remembers the controller's last status write of each ImageWarm
// until the manager's cache holds it. A status update returns before its
// watch event reaches the cache, and a NodeWarm change in that moment
// (an agent recreating the NodeWarm a user deleted, its report coming
// right after) is folded against the status as it was before the write.
// When the new fold equals that older status, the reconciler would find
// nothing to write and the server would keep the status just written
// (NotReporting) with no later event to mend it: ImageWarm status writes
// enqueue no reconcile. So a reconcile that reads an ImageWarm the cache
// has not yet updated reads it as the server has it, from here.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]ownWrite
}

// ownWrite is one status write: the resourceVersion it was made against,
// the one it made, and the status written.
type ownWrite struct {
	before, after string
	status        *warmv1.ImageWarmStatus
}

// record notes that key's status, at resourceVersion before, was written
// as status, making resourceVersion after.
func (o *ownWrites) record(key types.NamespacedName, before, after string, status *warmv1.ImageWarmStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[types.NamespacedName]ownWrite{}
	}
	o.m[key] = ownWrite{before: before, after: after, status: status.DeepCopy()}
}

// catchUp brings iw, read from the cache, up to the controller's own last
// write of it when the cache does not hold that write yet. iw must be the
// caller's own copy. The record is dropped once the cache holds the write
// or anything newer (a resourceVersion neither before nor after it).
func (o *ownWrites) catchUp(iw *warmv1.ImageWarm) {
	key := types.NamespacedName{Namespace: iw.Namespace, Name: iw.Name}
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.m[key]
	switch {
	case !ok:
	case iw.ResourceVersion == w.before:
		iw.ResourceVersion = w.after
		iw.Status = *w.status.DeepCopy()
	default:
		delete(o.m, key)
	}
}

// forget drops key, whose ImageWarm is gone.
func (o *ownWrites) forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

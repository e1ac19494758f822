package pullengine

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// A paused pull resumes from the bytes it had fetched only if the runtime
// still has them: containerd keeps a cancelled pull's partial blobs
// (ingests), but its garbage collection removes those no lease holds, and
// the cancelled pull's lease ends with it (on the test bed, within a
// second). Blobs a pull had fetched in full but not yet unpacked into an
// image are held by that lease alone too: a pull paused while it unpacks
// lost every layer (75 MB fetched again in one round of the real node's
// benchmark). So before stopping the pulls it pauses, the engine holds
// its pulls' ingests and blobs in a lease of its own, until every pull
// that resumes them has ended, or keptFor has passed (an agent that stops
// leaves the lease to expire).

// Keeper holds partial and whole blobs in the runtime for pulls to
// resume. A ContentView that implements it (*criclient.ContentStore does)
// has the engine keep its paused pulls' bytes.
type Keeper interface {
	// Keep holds the ingests named by refs and the blobs named by digests
	// in lease id until until.
	Keep(ctx context.Context, id string, refs, digests []string, until time.Time) error
	// Release ends lease id.
	Release(ctx context.Context, id string) error
}

// keptFor is how long a paused pull's bytes are held at most: far longer
// than yielding holds pulls back (yieldHoldMax).
const keptFor = time.Hour

// keep holds the ingests and blobs of the engine's pulls in a new lease,
// and has the paused jobs' successors release it when they have all ended.
func (e *Engine) keep(ctx context.Context, paused []*job) {
	keeper, ok := e.content.(Keeper)
	if !ok {
		return
	}
	ingests, err := e.content.Ingests(ctx)
	if err != nil {
		e.logger().Info("Reading the runtime's content store failed; the paused pulls' bytes may be fetched again", "error", err.Error())
		return
	}
	e.mu.Lock()
	mine := e.mine
	e.mu.Unlock()
	var refs, digests []string
	for _, in := range ingests {
		if in.Ref != "" && mine[in.Digest] {
			refs = append(refs, in.Ref)
		}
	}
	for d := range mine {
		digests = append(digests, d)
	}
	if len(refs) == 0 && len(digests) == 0 {
		return
	}
	slices.Sort(digests)
	now := e.clock.Now()
	id := fmt.Sprintf("warmer-paused-%d", now.UnixNano())
	if err := keeper.Keep(ctx, id, refs, digests, now.Add(keptFor)); err != nil {
		e.logger().Info("Holding the paused pulls' bytes failed; they may be fetched again", "error", err.Error())
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range paused {
		if n := j.successor; n != nil {
			e.unkeepLocked(n) // paused again: the new lease holds its bytes
			n.keptBy = id
			e.kept[id]++
		}
	}
	if e.kept[id] == 0 { // every successor dropped meanwhile
		go e.release(id)
	}
}

// unkeepLocked counts job j, ended or dropped, out of the lease holding
// its bytes, and ends the lease when j was the last it held bytes for.
func (e *Engine) unkeepLocked(j *job) {
	id := j.keptBy
	if id == "" {
		return
	}
	j.keptBy = ""
	if e.kept[id]--; e.kept[id] > 0 {
		return
	}
	delete(e.kept, id)
	go e.release(id)
}

// release ends lease id.
func (e *Engine) release(id string) {
	if err := e.content.(Keeper).Release(e.ctx, id); err != nil {
		e.logger().Info("Releasing a paused pull's bytes failed; the lease expires on its own", "lease", id, "error", err.Error())
	}
}

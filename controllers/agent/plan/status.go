package plan

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/internal/truncate"
	"github.com/warmer-dev/warmer/pkg/pullengine/pull"
)

// The NodeWarm status's pieces, as the planner puts them together.

func engineState(s pull.State) warmv1.ImageState {
	switch s {
	case pull.StatePulling:
		return warmv1.ImagePulling
	case pull.StateBackOff:
		return warmv1.ImageBackOff
	case pull.StateFailed:
		return warmv1.ImageFailed
	case pull.StatePulled:
		return warmv1.ImagePresent
	default:
		return warmv1.ImageQueued
	}
}

// warmIndex maps each ImageWarm the status lists (fairWarms) to its place
// in status.warms, which images refer to by index.
func warmIndex(warms []warmv1.WarmRef) map[types.NamespacedName]int32 {
	idx := make(map[types.NamespacedName]int32, len(warms))
	for i, w := range warms {
		idx[types.NamespacedName{Namespace: w.Namespace, Name: w.Name}] = int32(i)
	}
	return idx
}

// warmIndices lists where the ImageWarms that want an image stand in
// status.warms, at most MaxRequestedBy of them: a few bytes an image,
// where their names took tens.
func (p *planner) warmIndices(warms []types.NamespacedName) []int32 {
	out := make([]int32, 0, min(len(warms), warmv1.MaxRequestedBy))
	for _, nn := range warms {
		if i, ok := p.warmIndex[nn]; ok && len(out) < warmv1.MaxRequestedBy {
			out = append(out, i)
		}
	}
	return out
}

// transitionTime is the lastTransitionTime an image reports: none once it
// is present, which is most images most of the time.
func transitionTime(state warmv1.ImageState, since metav1.Time) *metav1.Time {
	if state == warmv1.ImagePresent || since.IsZero() {
		return nil
	}
	return &since
}

// count fills in the summary counts.
func count(st *warmv1.NodeWarmStatus) {
	st.Desired, st.Present, st.Pulling, st.Failed = int32(len(st.Images)), 0, 0, 0
	for _, img := range st.Images {
		switch img.State {
		case warmv1.ImagePresent:
			st.Present++
		case warmv1.ImagePulling, warmv1.ImageQueued:
			st.Pulling++
		case warmv1.ImageBackOff, warmv1.ImageFailed:
			st.Failed++
		}
	}
}

// digestOnly keeps "sha256:..." of "name@sha256:...", or nothing when the
// runtime's digest is not one the API takes: a report the API server
// refuses would hold back every image's.
func digestOnly(repoDigest string) string {
	if i := strings.LastIndexByte(repoDigest, '@'); i >= 0 {
		repoDigest = repoDigest[i+1:]
	}
	if !validDigest.MatchString(repoDigest) {
		return ""
	}
	return repoDigest
}

// validDigest is the NodeImage digest field's pattern.
var validDigest = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$`)

// maxImageLength is the NodeImage image field's bound.
const maxImageLength = 544

// statusMessage is a runtime message as an image's entry keeps it: plain
// text of at most MaxNodeMessageLength bytes.
func statusMessage(s string) string {
	return plainText(s, warmv1.MaxNodeMessageLength)
}

// plainText maps s onto the characters the API keeps in a NodeWarm's
// image entries, printable ASCII that JSON writes as one byte each, and
// cuts it to n bytes. Quotes become apostrophes, the rest of what JSON
// escapes a look-alike, other characters (line breaks, non-ASCII) a space
// or '?'. That keeps what a report can take as stored a function of its
// lengths (limits.go).
//
// A long message loses its middle, marked " ... ", not its end: runtime
// errors wrap their cause last ("failed to pull ... : failed to resolve
// ...: not found") and repeat the reference on the way, so the head says
// what failed and the tail why.
func plainText(s string, n int) string {
	if len(s) > 4*n {
		// More than n characters whatever they are: only the ends show,
		// and each end holds enough characters for its half.
		s = s[:2*n] + s[len(s)-2*n:]
	}
	b := make([]byte, 0, len(s))
	for _, r := range s {
		b = append(b, plainByte(r))
	}
	const mark = " ... "
	if len(b) <= n {
		return string(b)
	}
	if n < 2*len(mark) {
		return string(b[:n])
	}
	head := (n - len(mark)) / 2
	tail := n - len(mark) - head
	return string(b[:head]) + mark + string(b[len(b)-tail:])
}

func plainByte(r rune) byte {
	switch {
	case r == '"':
		return '\''
	case r == '\\':
		return '/'
	case r == '<':
		return '('
	case r == '>':
		return ')'
	case r == '&':
		return '+'
	case r == '\t' || r == '\n' || r == '\r':
		return ' '
	case r < ' ' || r > '~':
		return '?'
	}
	return byte(r)
}

func imageFilesystem(u pull.DiskUsage) *warmv1.ImageFilesystem {
	if u.Mountpoint == "" && !u.Known {
		return nil
	}
	fs := &warmv1.ImageFilesystem{Mountpoint: u.Mountpoint, UsedBytes: int64(u.ImagesBytes)}
	if u.Known {
		fs.CapacityBytes, fs.UsedPercent = int64(u.CapacityBytes), int32(u.Percent)
	}
	return fs
}

// runtimeCondition returns conds with RuntimeReady set.
func runtimeCondition(conds []metav1.Condition, status metav1.ConditionStatus, reason, msg string, now metav1.Time) []metav1.Condition {
	return setCondition(conds, metav1.Condition{Type: warmv1.ConditionRuntimeReady, Status: status, Reason: reason, Message: msg}, now)
}

// diskCondition returns conds with DiskPressure set from the guard's last
// reading: True above the threshold, False below, Unknown when the level
// cannot be read (the guard then holds pulls or not: u.Pressure).
func diskCondition(conds []metav1.Condition, u pull.DiskUsage, now metav1.Time) []metav1.Condition {
	c := metav1.Condition{Type: warmv1.ConditionDiskPressure, Status: metav1.ConditionUnknown, Reason: warmv1.ReasonLevelUnknown,
		Message: "The image filesystem's level cannot be read; pulls are not held back"}
	switch {
	case u.Pressure && !u.Known:
		c.Message = unknownLevelHeld
	case u.Pressure:
		c.Status, c.Reason = metav1.ConditionTrue, warmv1.ReasonAboveThreshold
		c.Message = fmt.Sprintf("Image filesystem %s is %d%% full, above the %d%% pull threshold: no pull starts", u.Mountpoint, u.Percent, u.ThresholdPercent)
	case u.Known:
		c.Status, c.Reason = metav1.ConditionFalse, warmv1.ReasonBelowThreshold
		c.Message = fmt.Sprintf("Image filesystem %s is %d%% full, pull threshold %d%%", u.Mountpoint, u.Percent, u.ThresholdPercent)
	}
	return setCondition(conds, c, now)
}

// listedCondition returns conds with ImagesListed set while the node wants
// more images than a NodeWarm lists, and without it otherwise.
func listedCondition(conds []metav1.Condition, wanted int, now metav1.Time) []metav1.Condition {
	return boundCondition(conds, wanted > warmv1.MaxNodeImages, metav1.Condition{Type: warmv1.ConditionImagesListed, Status: metav1.ConditionFalse,
		Reason: warmv1.ReasonTooManyImages, Message: fmt.Sprintf("%d images are wanted on this node, more than the %d a NodeWarm lists: "+
			"%d are listed, shared in turn among the namespaces that ask, and the counts cover all. ImageWarms count the images left out as unlisted here, "+
			"neither ready nor failed; the agent still warms them. Ask fewer images of this node", wanted, warmv1.MaxNodeImages, warmv1.MaxNodeImages)}, now)
}

// boundCondition returns conds with c set while a NodeWarm bound is
// exceeded (over), and without a condition of c's type otherwise.
func boundCondition(conds []metav1.Condition, over bool, c metav1.Condition, now metav1.Time) []metav1.Condition {
	if !over {
		out := append([]metav1.Condition(nil), conds...)
		meta.RemoveStatusCondition(&out, c.Type)
		return out
	}
	return setCondition(conds, c, now)
}

// unknownLevelHeld says that the guard, unable to read the level, holds
// pulls back (--image-fs-unknown=hold).
const unknownLevelHeld = "The image filesystem's level cannot be read; pulls are held back until it can (--image-fs-unknown=hold)"

// levelUnknownHeld is a held image's message while the level cannot be
// read: what the ImageWarm's owner reads in its failures, so it names the
// sources and both ways out, for whoever runs the agent.
const levelUnknownHeld = "the agent cannot read the image filesystem's level (neither the kubelet's /stats/summary nor statfs on the runtime's image filesystem), so no new pull starts: grant the agent nodes/stats, or set --image-fs-unknown=pull"

// diskMessage says why an image waits for space.
func diskMessage(u pull.DiskUsage) string {
	if !u.Known {
		return levelUnknownHeld
	}
	return fmt.Sprintf("image filesystem %s is %d%% full, above the %d%% pull threshold; waiting for space",
		u.Mountpoint, u.Percent, u.ThresholdPercent)
}

// setCondition returns a copy of conds with c set; a change of status
// takes now as its transition time (meta.SetStatusCondition would read the
// clock itself).
func setCondition(conds []metav1.Condition, c metav1.Condition, now metav1.Time) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	c.LastTransitionTime = now
	meta.SetStatusCondition(&out, c)
	return out
}

// RuntimeDown is the status to report while the runtime does not answer:
// the last report, kept whole, with RuntimeReady False and the cause.
func RuntimeDown(last warmv1.NodeWarmStatus, cause error, now time.Time) warmv1.NodeWarmStatus {
	st := *last.DeepCopy()
	st.Conditions = runtimeCondition(st.Conditions, metav1.ConditionFalse, warmv1.ReasonRuntimeNotAnswering,
		truncate.String(cause.Error(), warmv1.MaxMessageLength), metav1.NewTime(now))
	return st
}

// maxServedPerWarm is the API's bound of WarmRef.servedStarts.
const maxServedPerWarm = 999_999

// servedPerWarm is d's ImageWarms, each with the starts served from the
// images it wants: a start counts once for an ImageWarm however many of
// its entries share the image, and for every ImageWarm that wants it
// through an entry the image counts as present for (by entry key in
// present). An ImageWarm whose credentials never fetched another
// namespace's private image counts none of that namespace's starts.
func servedPerWarm(d Desired, byImage map[string]int, present map[string]bool) []warmv1.WarmRef {
	if len(byImage) == 0 {
		return d.warms
	}
	perWarm := map[types.NamespacedName]int{}
	counted := map[string]map[types.NamespacedName]bool{}
	for key, w := range d.images {
		n := byImage[w.refKey]
		if n == 0 || !present[key] {
			continue
		}
		if counted[w.refKey] == nil {
			counted[w.refKey] = map[types.NamespacedName]bool{}
		}
		for _, nn := range w.warms {
			if !counted[w.refKey][nn] {
				counted[w.refKey][nn] = true
				perWarm[nn] += n
			}
		}
	}
	if len(perWarm) == 0 {
		return d.warms
	}
	out := slices.Clone(d.warms)
	for i := range out {
		nn := types.NamespacedName{Namespace: out[i].Namespace, Name: out[i].Name}
		out[i].ServedStarts = int32(min(perWarm[nn], maxServedPerWarm))
	}
	return out
}

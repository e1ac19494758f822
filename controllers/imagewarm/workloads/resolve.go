package workloads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/imageref"
)

// hashLength is the number of hex digits of a resolved set's hash: 64 bits
// tell sets of one ImageWarm apart, and the hash is written once per
// ImageWarm in every node's report.
const hashLength = 16

// Invalid is a template image that is not a valid reference.
type Invalid struct {
	// Workload is kind/name, e.g. Deployment/web.
	Workload string
	// Where names the container or volume.
	Where string
	// Image is the reference as written.
	Image string
	// Err says what is wrong with it.
	Err error
}

// Result is what an ImageWarm's imagesFrom resolved to.
type Result struct {
	// Images are the distinct normalised references the workloads name
	// and spec.images does not, sorted, at most the limit given.
	Images []string
	// Hash identifies Images.
	Hash string
	// Workloads is the number of workloads read.
	Workloads int
	// Dropped is the number of distinct images past the limit.
	Dropped int
	// Invalid lists every template image that does not parse, in the
	// order the workloads were given.
	Invalid []Invalid
}

// Status is the result as an ImageWarm status reports it.
func (r *Result) Status() *warmv1.ResolvedImages {
	return &warmv1.ResolvedImages{Images: r.Images, Hash: r.Hash, Workloads: int32(r.Workloads),
		Dropped: int32(r.Dropped), Invalid: int32(len(r.Invalid))}
}

// Resolve folds the images of the workloads' pod templates into one set:
// normalised the way agents normalise them (so "nginx" and
// "docker.io/library/nginx:latest" are one image), without those spec
// already lists, sorted, and cut to the first limit images so that the
// ImageWarm never asks more than MaxImagesPerWarm of a node. Images that
// do not parse are left out and listed in Invalid: a bad template must
// not stop the others' images from being warmed. Objects that are not
// workloads are ignored.
func Resolve(spec []warmv1.ImageReference, objs []client.Object, limit int) Result {
	inSpec := make(map[string]bool, len(spec))
	for _, img := range spec {
		inSpec[key(string(img))] = true
	}
	var res Result
	found := map[string]bool{}
	for _, o := range objs {
		kind := KindOf(o)
		if kind == "" {
			continue
		}
		res.Workloads++
		for _, ti := range Images(o) {
			ref, err := imageref.Parse(ti.Image)
			if err != nil {
				res.Invalid = append(res.Invalid, Invalid{Workload: string(kind) + "/" + o.GetName(), Where: ti.Where, Image: ti.Image, Err: err})
				continue
			}
			if k := ref.String(); !inSpec[k] {
				found[k] = true
			}
		}
	}
	res.Images = make([]string, 0, len(found))
	for k := range found {
		res.Images = append(res.Images, k)
	}
	sort.Strings(res.Images)
	if limit = max(limit, 0); len(res.Images) > limit {
		res.Dropped = len(res.Images) - limit
		res.Images = res.Images[:limit:limit]
	}
	res.Hash = Hash(res.Images)
	return res
}

// Limit is how many images imagesFrom may add to spec's: MaxImagesPerWarm
// less spec's distinct images.
func Limit(spec []warmv1.ImageReference) int {
	distinct := map[string]bool{}
	for _, img := range spec {
		distinct[key(string(img))] = true
	}
	return max(warmv1.MaxImagesPerWarm-len(distinct), 0)
}

// Hash identifies a sorted set of normalised references. The empty set has
// a hash too: an agent that echoes it has seen that nothing resolved.
func Hash(images []string) string {
	h := sha256.New()
	for _, img := range images {
		_, _ = fmt.Fprintln(h, img)
	}
	return hex.EncodeToString(h.Sum(nil))[:hashLength]
}

// key is the normalised reference of image, or image itself when it does
// not parse (the agent reports it so).
func key(image string) string {
	ref, err := imageref.Parse(image)
	if err != nil {
		return image
	}
	return ref.String()
}

package imagewarm

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/imagewarm/workloads"
)

// resolvedSlack is what imagesFrom may add to an ImageWarm's size beside
// the list it resolves: the hash, the counts and the ImagesResolved
// condition.
const resolvedSlack = 512

// TestImagesFromStatusBudget checks that images resolved from workloads
// cost no more than the same images written in spec.images: the whole
// object (what a watch event carries to every agent) and the status
// without the resolved list (what the status budget bounds) of an
// ImageWarm of 100 resolved images stay within resolvedSlack of the
// spec-only ImageWarm's, settled and rolling out with failures.
func TestImagesFromStatusBudget(t *testing.T) {
	refs := make([]string, warmv1.MaxImagesPerWarm)
	for i := range refs {
		refs[i] = fmt.Sprintf("registry.example.com/team/service-%02d:v1.2.%d", i, i%10)
	}
	hash := workloads.Hash(refs)
	cases := map[string]func(node, image int) warmv1.ImageState{
		"settled": func(int, int) warmv1.ImageState { return warmv1.ImagePresent },
		"rolling out, failures": func(node, image int) warmv1.ImageState {
			switch {
			case node%10 == 0 && image%7 == 0:
				return warmv1.ImageBackOff
			case (node+image)%3 == 0:
				return warmv1.ImagePulling
			}
			return warmv1.ImagePresent
		},
	}
	for name, state := range cases {
		t.Run(name, func(t *testing.T) {
			spec := iwNewWarm(1, nil, refs...)
			from := iwNewWarm(1, nil)
			from.Spec.ImagesFrom = &warmv1.ImagesFrom{}
			from.Status.Resolved = &warmv1.ResolvedImages{Images: refs, Hash: hash, Workloads: 40}
			meta := imagesResolvedCondition(&workloads.Result{Images: refs, Workloads: 40}, 1)
			from.Status.Conditions = []metav1.Condition{meta}
			specObj, specStatus := budgetSizes(t, spec, budgetReports(100, refs, "", state))
			fromObj, fromStatus := budgetSizes(t, from, budgetReports(100, refs, hash, state))
			t.Logf("object %d bytes from workloads, %d from the spec; status without the list %d, %d", fromObj, specObj, fromStatus, specStatus)
			if fromObj > specObj+resolvedSlack {
				t.Errorf("the object takes %d bytes with imagesFrom, %d with the same images in the spec", fromObj, specObj)
			}
			if fromStatus > specStatus+resolvedSlack {
				t.Errorf("the status without the resolved list takes %d bytes, %d for the spec's images", fromStatus, specStatus)
			}
		})
	}
}

// budgetReports are n nodes' reports on refs, echoing hash.
func budgetReports(n int, refs []string, hash string, state func(node, image int) warmv1.ImageState) *fleet {
	nodes := make([]metav1.PartialObjectMetadata, n)
	reports := make([]warmv1.NodeWarm, n)
	for i := range n {
		name := fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/250, i%250)
		nodes[i] = iwNodeMeta(name)
		imgs := make([]warmv1.NodeImage, len(refs))
		for j, r := range refs {
			imgs[j] = iwImg(r, state(i, j))
			if imgs[j].State == warmv1.ImageBackOff {
				imgs[j].Reason, imgs[j].Message = "Unauthorized", "failed to pull and unpack image: 401 Unauthorized"
			}
		}
		reports[i] = iwReport(name, []warmv1.WarmRef{{Namespace: "default", Name: "web", Generation: 1, Resolved: hash}}, imgs...)
	}
	return newFleet(nodes, reports)
}

// budgetSizes folds iw's status and returns the JSON size of the whole
// object and of the status without the resolved list.
func budgetSizes(t *testing.T, iw *warmv1.ImageWarm, f *fleet) (object, status int) {
	t.Helper()
	st, err := aggregateStatus(iw, f)
	if err != nil {
		t.Fatal(err)
	}
	obj := iw.DeepCopy()
	obj.Status = st
	whole, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	st.Resolved = nil
	rest, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return len(whole), len(rest)
}

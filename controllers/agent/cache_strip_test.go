package agent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/agent/plan"
	"github.com/warmer-dev/warmer/test/testbed/build"
)

// readBy says, for each field of an ImageWarm's spec and status, whether
// the agent reads it (and the cache keeps it) or not (and the cache drops
// it). A field added to the API fails TestStripImageWarm until it is
// placed here, and the fixture sets it.
var readBy = map[string]bool{
	"Spec.Images": true, "Spec.ImagesFrom": true, "Spec.NodeSelector": true, "Spec.PullPolicy": true,
	"Spec.RefreshInterval": true, "Spec.ImagePullSecrets": true, "Spec.Priority": true, "Spec.Suspend": true,
	"Spec.PullTimeout": true, "Spec.StartupTaint": true, "Spec.Retention": true, "Spec.Rollout": true,
	"Spec.NodeLabel": true, "Spec.Artifacts": true,
	"Spec.Readiness":  false,
	"Status.Resolved": true, "Status.Rollout": true,
	"Status.ObservedGeneration": false, "Status.Conditions": false, "Status.ImageCount": false,
	"Status.ReadyImages": false, "Status.Nodes": false, "Status.Images": false, "Status.Failures": false,
	"Status.SilentNodes": false, "Status.PullProgress": false, "Status.ServedStarts": false,
	"Status.ObservedGenerationTime": false,
}

const stripNodeName = "node-a"

// TestStripImageWarm checks that the agent's cache keeps of an ImageWarm
// what the agent reads: the planner decides the same from stripped
// ImageWarms as from whole ones (its selection, images, wishes,
// secrets, taint holds and rollout admission), the watch predicates see
// the same generation, resolved hash and admission, and every field of
// the spec and status the agent does not read is gone, as are labels,
// annotations, managed fields, owners and finalizers.
func TestStripImageWarm(t *testing.T) {
	full := fullImageWarms()
	checkFixtureSetsEveryField(t, full)
	stripped := make([]warmv1.ImageWarm, len(full))
	for i := range full {
		out, err := stripImageWarm(full[i].DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		stripped[i] = *out.(*warmv1.ImageWarm)
	}
	nodeLabels := map[string]string{"pool": "web", "zone": "a"}
	bounds := plan.Bounds{{Namespace: "team-a", Name: "bounded"}: &warmv1.RolloutBound{Spec: warmv1.RolloutBoundSpec{
		ImageWarmUID: "uid-bounded", Generation: 4, AdmittedBelow: 1 << 32}}}
	want, wantBad := (&plan.Memo{}).Desired(stripNodeName, nodeLabels, full, bounds)
	got, gotBad := (&plan.Memo{}).Desired(stripNodeName, nodeLabels, stripped, bounds)
	if len(want.Keys()) < 2 {
		t.Fatalf("the fixture asks node %s for %v: too little to compare", stripNodeName, want.Keys())
	}
	if !reflect.DeepEqual(want, got) || !reflect.DeepEqual(wantBad, gotBad) {
		t.Errorf("the planner's Desired from stripped ImageWarms differs from the whole ones' (images %v, want %v)", got.Keys(), want.Keys())
	}
	for i := range full {
		f, s := &full[i], &stripped[i]
		if f.Generation != s.Generation || f.ResolvedHash() != s.ResolvedHash() ||
			warmv1.RolloutAdmits(f, nil, stripNodeName) != warmv1.RolloutAdmits(s, nil, stripNodeName) {
			t.Errorf("%s: the predicates' inputs differ once stripped", f.Name)
		}
		checkDropped(t, s)
	}
}

// checkDropped checks that s holds nothing the agent does not read.
func checkDropped(t *testing.T, s *warmv1.ImageWarm) {
	t.Helper()
	if s.Labels != nil || s.Annotations != nil || s.ManagedFields != nil || s.OwnerReferences != nil || s.Finalizers != nil {
		t.Errorf("%s keeps metadata the agent does not read: %+v", s.Name, s.ObjectMeta)
	}
	if f := s.Spec.ImagesFrom; f != nil && !reflect.DeepEqual(*f, warmv1.ImagesFrom{}) {
		t.Errorf("%s keeps spec.imagesFrom %+v; the agent reads only that it is there", s.Name, *f)
	}
	eachField(*s, func(path string, v reflect.Value) {
		if !readBy[path] && !v.IsZero() {
			t.Errorf("%s keeps %s, which the agent does not read", s.Name, path)
		}
	})
}

// checkFixtureSetsEveryField checks that some ImageWarm of warms sets
// each spec and status field, and that each is placed in readBy.
func checkFixtureSetsEveryField(t *testing.T, warms []warmv1.ImageWarm) {
	t.Helper()
	set := map[string]bool{}
	for _, iw := range warms {
		eachField(iw, func(path string, v reflect.Value) {
			set[path] = set[path] || !v.IsZero()
		})
	}
	for path, isSet := range set {
		if _, ok := readBy[path]; !ok {
			t.Errorf("%s is new: say in readBy whether the agent reads it", path)
		}
		if !isSet {
			t.Errorf("the fixture leaves %s unset", path)
		}
	}
}

// eachField calls f with each field of iw's spec and status.
func eachField(iw warmv1.ImageWarm, f func(path string, v reflect.Value)) {
	for _, part := range []string{"Spec", "Status"} {
		v := reflect.ValueOf(iw).FieldByName(part)
		for i := range v.NumField() {
			f(part+"."+v.Type().Field(i).Name, v.Field(i))
		}
	}
}

// fullImageWarms are ImageWarms with every field set, as the API server
// serves them, in the cases the planner tells apart: imagesFrom, a
// rollout admitted by its status or by a RolloutBound or not yet,
// suspended, being deleted, selecting another pool, resolved images left
// from an imagesFrom since removed.
func fullImageWarms() []warmv1.ImageWarm {
	base := largeImageWarm("team-a", "whole", 20)
	suspended := base.DeepCopy()
	suspended.Name, suspended.UID, suspended.Spec.Suspend = "suspended", "uid-suspended", true
	bounded := base.DeepCopy()
	bounded.Name, bounded.UID = "bounded", "uid-bounded"
	bounded.Status.Rollout.AdmittedBelow = 0
	waiting := base.DeepCopy()
	waiting.Name, waiting.UID = "waiting", "uid-waiting"
	waiting.Status.Rollout.Generation = base.Generation - 1
	deleted := base.DeepCopy()
	deleted.Name, deleted.DeletionTimestamp = "deleted", ptr.To(metav1.Now())
	elsewhere := base.DeepCopy()
	elsewhere.Name, elsewhere.Spec.NodeSelector.MatchLabels["pool"] = "elsewhere", "batch"
	noFrom := base.DeepCopy()
	noFrom.Namespace, noFrom.Name, noFrom.Spec.ImagesFrom = "team-b", "stale-resolved", nil
	noFrom.Spec.Rollout, noFrom.Spec.ImagePullSecrets = nil, nil
	return []warmv1.ImageWarm{*base, *suspended, *bounded, *waiting, *deleted, *elsewhere, *noFrom}
}

// largeImageWarm is an ImageWarm of n spec images and n resolved ones,
// with every field set and metadata as kubectl apply and the controller
// leave it: labels, the last-applied annotation, managed fields.
func largeImageWarm(ns, name string, n int) *warmv1.ImageWarm {
	refs := build.RealisticRefs(2 * n)
	iw := build.ImageWarm(ns, name, build.Images(refs[:n]...), build.Selector(map[string]warmv1.LabelValue{"pool": "web"}))
	iw.UID, iw.Generation, iw.ResourceVersion = types.UID("uid-"+name), 4, "123456"
	iw.CreationTimestamp = metav1.Now()
	iw.Spec.ImagesFrom = &warmv1.ImagesFrom{WorkloadSelector: warmv1.LabelSelector{MatchLabels: map[string]warmv1.LabelValue{"app": "shop"}},
		Kinds: []warmv1.WorkloadKind{"Deployment", "StatefulSet"}}
	iw.Spec.PullPolicy, iw.Spec.RefreshInterval = warmv1.PullAlways, &metav1.Duration{Duration: time.Hour}
	iw.Spec.ImagePullSecrets = []warmv1.SecretReference{{Name: "regcred"}}
	iw.Spec.Priority, iw.Spec.PullTimeout, iw.Spec.StartupTaint = 10, &metav1.Duration{Duration: time.Minute}, true
	iw.Spec.NodeLabel = true
	iw.Spec.Artifacts = []warmv1.ImageReference{warmv1.ImageReference("registry.example/models/" + name + ":v1")}
	iw.Spec.Readiness = &warmv1.Readiness{MinReadyNodes: ptr.To(intstr.FromString("90%"))}
	iw.Spec.Retention = warmv1.RetentionPinned
	iw.Spec.Rollout = &warmv1.Rollout{MaxPulling: ptr.To(intstr.FromInt32(10)), Canary: true}
	iw.Labels, iw.Annotations = map[string]string{}, map[string]string{}
	for i := range 16 {
		iw.Labels[fmt.Sprintf("example.com/label-%02d", i)] = strings.Repeat("v", 40)
	}
	spec, _ := json.Marshal(iw.Spec)
	iw.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = string(spec)
	iw.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "uid-owner"}}
	iw.Finalizers = []string{"example.com/keep"}
	iw.ManagedFields = managedFields(iw)
	fillStatus(iw, refs[n:])
	return iw
}

// fillStatus writes the controller's status of iw, resolved images and
// admitting rollout included.
func fillStatus(iw *warmv1.ImageWarm, resolved []string) {
	now := metav1.Now()
	s := &iw.Status
	s.ObservedGeneration, s.ImageCount, s.ReadyImages = iw.Generation, int32(len(iw.Spec.Images)), 3
	s.Nodes = warmv1.NodeCounts{Matching: 100, Ready: 90, Pulling: 5, Failed: 5}
	for _, c := range []string{"Ready", "Progressing", "Degraded", "ImagesResolved"} {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Test",
			Message: strings.Repeat("m", 200), LastTransitionTime: now, ObservedGeneration: iw.Generation})
	}
	for i, img := range iw.Spec.Images {
		s.Images = append(s.Images, warmv1.ImageFleetStatus{Image: string(img), Ready: 90, Pulling: 5, Failed: 5})
		if i < 10 {
			s.Failures = append(s.Failures, warmv1.NodeFailure{Node: fmt.Sprintf("node-%d", i), Image: string(img), Reason: "ErrImagePull"})
		}
	}
	s.SilentNodes = []warmv1.SilentNode{{Node: "node-9", Since: now}}
	s.PullProgress = &warmv1.FleetPullProgress{Nodes: 5, BytesDone: 1 << 30}
	s.ServedStarts, s.ObservedGenerationTime = 42, &now
	s.Resolved = &warmv1.ResolvedImages{Images: resolved, Hash: "0123456789abcdef", Workloads: 3}
	s.Rollout = &warmv1.RolloutStatus{Generation: iw.Generation, Resolved: "0123456789abcdef", AdmittedBelow: 1 << 32, Admitted: 10}
}

// managedFields are entries of the shape the API server keeps for a
// kubectl apply of iw's spec, labels and annotation and for the
// controller's status writes.
func managedFields(iw *warmv1.ImageWarm) []metav1.ManagedFieldsEntry {
	keys := func(prefix string, names []string) string {
		parts := []string{`".":{}`}
		for _, n := range names {
			parts = append(parts, fmt.Sprintf(`"%s%s":{}`, prefix, n))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var labels []string
	for k := range iw.Labels {
		labels = append(labels, k)
	}
	apply := fmt.Sprintf(`{"f:metadata":{"f:annotations":%s,"f:labels":%s},"f:spec":%s}`,
		keys("f:", []string{"kubectl.kubernetes.io/last-applied-configuration"}), keys("f:", labels),
		keys("f:", []string{"images", "imagesFrom", "nodeSelector", "pullPolicy", "refreshInterval", "imagePullSecrets",
			"priority", "pullTimeout", "startupTaint", "readiness", "retention", "rollout"}))
	var conditions, images []string
	for _, c := range iw.Status.Conditions {
		conditions = append(conditions, fmt.Sprintf(`k:{\"type\":\"%s\"}`, c.Type))
	}
	for _, img := range iw.Spec.Images {
		images = append(images, fmt.Sprintf(`k:{\"image\":\"%s\"}`, img))
	}
	status := fmt.Sprintf(`{"f:status":{"f:conditions":%s,"f:images":%s,"f:nodes":{},"f:resolved":{},"f:rollout":{}}}`,
		keys("", conditions), keys("", images))
	at := metav1.Now()
	return []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "warmer.dev/v1alpha1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(apply)},
		{Manager: "warmer", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "warmer.dev/v1alpha1",
			Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(status), Subresource: "status"},
	}
}

// BenchmarkImageWarmCache measures the heap an agent's cache holds per
// ImageWarm of 100 images (the most one may list) and 100 resolved ones,
// as served with labels, annotation, managed fields and the controller's
// status, decoded from JSON as the informer does, whole and stripped by
// the cache's transform: retained-B/imagewarm is what every agent pays
// for each ImageWarm in the cluster.
func BenchmarkImageWarmCache(b *testing.B) {
	raw, err := json.Marshal(largeImageWarm("team-a", "large", warmv1.MaxImagesPerWarm))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		strip bool
	}{{"whole", false}, {"stripped", true}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 500
			kept := make([]any, n)
			var before, after runtime.MemStats
			for b.Loop() {
				clear(kept)
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range kept {
					var iw warmv1.ImageWarm
					if err := json.Unmarshal(raw, &iw); err != nil {
						b.Fatal(err)
					}
					kept[i] = &iw
					if c.strip {
						kept[i], _ = stripImageWarm(&iw)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
			}
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "retained-B/imagewarm")
			runtime.KeepAlive(kept)
		})
	}
}

package imagewarm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/controllers/imagewarm/workloads"
	"github.com/warmer-dev/warmer/test/testbed"
)

// TestImagesFromWorkloads runs the status controller against a real API
// server: the ImageWarm's images come from a Deployment's template, follow
// it when it changes, and a node's report counts only when it echoes the
// current resolved set. No kube-controller-manager runs: the Deployment
// object alone is what the controller reads.
func TestImagesFromWorkloads(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	startImageWarmController(t, cp)
	ctx := t.Context()
	e := &iwEnv{t: t, cp: cp, key: client.ObjectKey{Namespace: "default", Name: "from"}}
	cp.CreateNode(t, "wl-1", map[string]string{"zone": "w"})

	deploy := iwDeployment("web", map[string]string{"app": "web"}, "app:v1", "init:v1")
	other := iwDeployment("other", map[string]string{"app": "other"}, "other:v1", "")
	for _, o := range []client.Object{deploy, other} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name},
		Spec: warmv1.ImageWarmSpec{NodeSelector: iwZone("w"), ImagesFrom: &warmv1.ImagesFrom{
			WorkloadSelector: warmv1.LabelSelector{MatchLabels: map[string]warmv1.LabelValue{"app": "web"}}}}}
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	v1 := []string{"docker.io/library/app:v1", "docker.io/library/init:v1"}
	v2 := []string{"docker.io/library/app:v2", "docker.io/library/init:v1"}

	t.Run("resolves the selected Deployment's images", func(t *testing.T) {
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(iwResolved(st, v1, 1),
				iwCond(st, warmv1.ConditionImagesResolved, metav1.ConditionTrue, warmv1.ReasonResolved),
				iwCounts(st, warmv1.NodeCounts{Matching: 1, NotReporting: 1}))
		})
	})
	hashV1 := workloads.Hash(v1)

	t.Run("ready once the node reports the resolved set", func(t *testing.T) {
		e.putReport("wl-1", iwFromAt(1, hashV1), iwImg(v1[0], warmv1.ImagePresent), iwImg(v1[1], warmv1.ImagePresent))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(iwCounts(st, warmv1.NodeCounts{Matching: 1, Ready: 1}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm))
		})
	})

	t.Run("a new template image is resolved without an ImageWarm edit, and Ready waits for it", func(t *testing.T) {
		deploy.Spec.Template.Spec.Containers[0].Image = "app:v2"
		if err := cp.Client.Update(ctx, deploy); err != nil {
			t.Fatal(err)
		}
		// The node's report is on the old set: it does not count, though
		// every image it lists is present.
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(iwResolved(st, v2, 1), iwGeneration(st, 1),
				iwCounts(st, warmv1.NodeCounts{Matching: 1, NotReporting: 1}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonNotReporting))
		})
		e.putReport("wl-1", iwFromAt(1, workloads.Hash(v2)), iwImg(v2[0], warmv1.ImagePulling), iwImg(v2[1], warmv1.ImagePresent))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(iwCounts(st, warmv1.NodeCounts{Matching: 1, Pulling: 1}),
				iwCond(st, warmv1.ConditionReady, metav1.ConditionFalse, warmv1.ReasonPulling))
		})
		e.putReport("wl-1", iwFromAt(1, workloads.Hash(v2)), iwImg(v2[0], warmv1.ImagePresent), iwImg(v2[1], warmv1.ImagePresent))
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwCond(st, warmv1.ConditionReady, metav1.ConditionTrue, warmv1.ReasonAllNodesWarm)
		})
	})

	t.Run("a selected CronJob with a bad image is reported, its good image warmed", func(t *testing.T) {
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly", Labels: map[string]string{"app": "web"}},
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: iwPodTemplate(map[string]string{"job": "nightly"}, corev1.RestartPolicyNever, "backup:v1", "Bad/Image")}}}}
		if err := cp.Client.Create(ctx, cj); err != nil {
			t.Fatal(err)
		}
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwAll(iwResolved(st, []string{"docker.io/library/app:v2", "docker.io/library/backup:v1", "docker.io/library/init:v1"}, 2),
				iwCond(st, warmv1.ConditionImagesResolved, metav1.ConditionFalse, warmv1.ReasonInvalidImages))
		})
	})

	t.Run("kinds limit what is read", func(t *testing.T) {
		e.update(func(iw *warmv1.ImageWarm) { iw.Spec.ImagesFrom.Kinds = []warmv1.WorkloadKind{warmv1.KindCronJob} })
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			return iwResolved(st, []string{"docker.io/library/backup:v1"}, 1)
		})
	})

	t.Run("without imagesFrom the resolved set goes", func(t *testing.T) {
		e.update(func(iw *warmv1.ImageWarm) {
			iw.Spec.ImagesFrom, iw.Spec.Images = nil, []warmv1.ImageReference{"nginx"}
		})
		e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
			if st.Resolved != nil || slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool { return c.Type == warmv1.ConditionImagesResolved }) {
				return fmt.Errorf("resolved %+v, conditions %+v", st.Resolved, st.Conditions)
			}
			return iwGeneration(st, 3)
		})
	})
}

// TestImagesFromKindsNotWatched runs a controller that watches only
// StatefulSets (--images-from-kinds=StatefulSet): an ImageWarm reading
// every kind gets the StatefulSet's images, not the Deployment's, and a
// condition naming the kinds it cannot read.
func TestImagesFromKindsNotWatched(t *testing.T) {
	cp := testbed.StartControlPlane(t)
	startImageWarmControllerWatching(t, cp, []warmv1.WorkloadKind{warmv1.KindStatefulSet})
	ctx := t.Context()
	e := &iwEnv{t: t, cp: cp, key: client.ObjectKey{Namespace: "default", Name: "from"}}
	labels := map[string]string{"app": "web"}
	pod := map[string]string{"pod": "db"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", Labels: labels},
		Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: pod},
			Template: iwPodTemplate(pod, corev1.RestartPolicyAlways, "db:v1", "")}}
	for _, o := range []client.Object{sts, iwDeployment("web", labels, "app:v1", "")} {
		if err := cp.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	iw := &warmv1.ImageWarm{ObjectMeta: metav1.ObjectMeta{Namespace: e.key.Namespace, Name: e.key.Name},
		Spec: warmv1.ImageWarmSpec{ImagesFrom: &warmv1.ImagesFrom{
			WorkloadSelector: warmv1.LabelSelector{MatchLabels: map[string]warmv1.LabelValue{"app": "web"}}}}}
	if err := cp.Client.Create(ctx, iw); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, func(st warmv1.ImageWarmStatus) error {
		if err := iwAll(iwResolved(st, []string{"docker.io/library/db:v1"}, 1),
			iwCond(st, warmv1.ConditionImagesResolved, metav1.ConditionFalse, warmv1.ReasonKindsNotWatched)); err != nil {
			return err
		}
		c := meta.FindStatusCondition(st.Conditions, warmv1.ConditionImagesResolved)
		if !strings.Contains(c.Message, "[Deployment DaemonSet Job CronJob]") {
			return fmt.Errorf("message %q does not name the kinds not watched", c.Message)
		}
		return nil
	})
}

// iwFromAt says the node's agent acts on default/from at generation gen
// and the resolved set of that hash.
func iwFromAt(gen int64, hash string) []warmv1.WarmRef {
	return []warmv1.WarmRef{{Namespace: "default", Name: "from", Generation: gen, Resolved: hash}}
}

func iwResolved(st warmv1.ImageWarmStatus, want []string, nworkloads int32) error {
	r := st.Resolved
	switch {
	case r == nil:
		return fmt.Errorf("no resolved images")
	case !slices.Equal(r.Images, want) || r.Workloads != nworkloads || r.Hash != workloads.Hash(want):
		return fmt.Errorf("resolved %+v, want images %q from %d workloads", *r, want, nworkloads)
	case st.ImageCount != int32(len(want)):
		return fmt.Errorf("imageCount %d, want %d", st.ImageCount, len(want))
	}
	return nil
}

func iwPodTemplate(labels map[string]string, restart corev1.RestartPolicy, image, initImage string) corev1.PodTemplateSpec {
	spec := corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "main", Image: image}}}
	if initImage != "" {
		spec.InitContainers = []corev1.Container{{Name: "init", Image: initImage}}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
}

func iwDeployment(name string, labels map[string]string, image, initImage string) *appsv1.Deployment {
	pod := map[string]string{"pod": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: pod},
			Template: iwPodTemplate(pod, corev1.RestartPolicyAlways, image, initImage)}}
}

func TestImagesResolvedCondition(t *testing.T) {
	bad := workloads.Invalid{Workload: "Deployment/web", Where: "containers[app]", Image: "Bad", Err: fmt.Errorf("invalid reference format")}
	cases := []struct {
		name   string
		res    workloads.Result
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"all resolved", workloads.Result{Images: []string{"a", "b"}, Workloads: 3}, metav1.ConditionTrue, warmv1.ReasonResolved, "2 images from 3 workloads"},
		{"too many", workloads.Result{Images: make([]string, 100), Dropped: 7}, metav1.ConditionFalse, warmv1.ReasonTooManyImages, "7 more images"},
		{"invalid first", workloads.Result{Dropped: 7, Invalid: []workloads.Invalid{bad}}, metav1.ConditionFalse, warmv1.ReasonInvalidImages,
			"1 template images are not valid references and are not warmed; first: Deployment/web containers[app]: invalid reference format"},
	}
	for _, c := range cases {
		got := imagesResolvedCondition(&c.res, 4)
		if got.Status != c.status || got.Reason != c.reason || !strings.Contains(got.Message, c.msg) || got.ObservedGeneration != 4 {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

package workloads

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

func podSpecOf(init []string, containers []string, volumes ...string) corev1.PodSpec {
	var s corev1.PodSpec
	for i, img := range init {
		s.InitContainers = append(s.InitContainers, corev1.Container{Name: fmt.Sprintf("init%d", i), Image: img})
	}
	for i, img := range containers {
		s.Containers = append(s.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	for i, ref := range volumes {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
			VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: ref}}})
	}
	// A volume of another kind names no image.
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return s
}

func tmpl(s corev1.PodSpec) corev1.PodTemplateSpec { return corev1.PodTemplateSpec{Spec: s} }

// workload builds an object of kind whose template is s.
func workload(kind warmv1.WorkloadKind, name string, s corev1.PodSpec) client.Object {
	om := metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": name}}
	switch kind {
	case warmv1.KindDeployment:
		return &appsv1.Deployment{ObjectMeta: om, Spec: appsv1.DeploymentSpec{Template: tmpl(s)}}
	case warmv1.KindStatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: om, Spec: appsv1.StatefulSetSpec{Template: tmpl(s)}}
	case warmv1.KindDaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: om, Spec: appsv1.DaemonSetSpec{Template: tmpl(s)}}
	case warmv1.KindJob:
		return &batchv1.Job{ObjectMeta: om, Spec: batchv1.JobSpec{Template: tmpl(s)}}
	case warmv1.KindCronJob:
		return &batchv1.CronJob{ObjectMeta: om, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl(s)}}}}
	}
	panic(kind)
}

func TestImagesEveryKind(t *testing.T) {
	for _, kind := range warmv1.WorkloadKinds {
		t.Run(string(kind), func(t *testing.T) {
			o := workload(kind, "w", podSpecOf([]string{"init:1"}, []string{"app:1", "", "side:1"}, "data:1"))
			if KindOf(o) != kind {
				t.Fatalf("KindOf = %q", KindOf(o))
			}
			var got []string
			for _, ti := range Images(o) {
				got = append(got, ti.Where+"="+ti.Image)
			}
			want := []string{"initContainers[init0]=init:1", "containers[c0]=app:1", "containers[c2]=side:1", "volumes[v0]=data:1"}
			if !slices.Equal(got, want) {
				t.Errorf("Images = %v, want %v", got, want)
			}
			// The cache's copy names the same images and nothing else.
			stripped, err := Transform(o)
			if err != nil {
				t.Fatal(err)
			}
			var again []string
			for _, ti := range Images(stripped) {
				again = append(again, ti.Where+"="+ti.Image)
			}
			if !slices.Equal(again, want) {
				t.Errorf("Images after Transform = %v, want %v", again, want)
			}
			s := stripped.(client.Object)
			if s.GetName() != "w" || s.GetNamespace() != "ns" || s.GetLabels()["app"] != "w" {
				t.Errorf("Transform lost the identity or labels: %s/%s %v", s.GetNamespace(), s.GetName(), s.GetLabels())
			}
		})
	}
}

func TestTransformDropsTheRest(t *testing.T) {
	s := podSpecOf(nil, []string{"app:1"})
	s.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: strings.Repeat("x", 1000)}}
	s.Containers[0].Command = []string{"/app"}
	s.NodeSelector = map[string]string{"a": "b"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Annotations: map[string]string{"big": strings.Repeat("y", 1000)},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: appsv1.DeploymentSpec{Template: tmpl(s)}, Status: appsv1.DeploymentStatus{Replicas: 3}}
	out, _ := Transform(d)
	got := out.(*appsv1.Deployment)
	c := got.Spec.Template.Spec.Containers[0]
	if c.Env != nil || c.Command != nil || got.Spec.Template.Spec.NodeSelector != nil || got.Annotations != nil ||
		got.ManagedFields != nil || got.Status.Replicas != 0 || len(got.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("Transform kept more than images: %+v", got)
	}
	if other := (&corev1.Pod{}); mustTransform(t, other) != any(other) {
		t.Error("Transform changed a Pod")
	}
}

func mustTransform(t *testing.T, o any) any {
	t.Helper()
	out, err := Transform(o)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResolve(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name      string
		spec      []warmv1.ImageReference
		objs      []client.Object
		limit     int
		want      []string
		workloads int
		dropped   int
		invalid   []string
	}{
		{name: "every kind, init containers and volumes",
			objs: []client.Object{
				workload(warmv1.KindDeployment, "a", podSpecOf([]string{"init"}, []string{"app:1"})),
				workload(warmv1.KindStatefulSet, "b", podSpecOf(nil, []string{"db:2"})),
				workload(warmv1.KindDaemonSet, "c", podSpecOf(nil, []string{"agent:3"})),
				workload(warmv1.KindJob, "d", podSpecOf(nil, []string{"migrate:4"})),
				workload(warmv1.KindCronJob, "e", podSpecOf(nil, []string{"backup:5"}, "registry.example/models:v1")),
			},
			limit: 100, workloads: 5,
			want: []string{"docker.io/library/agent:3", "docker.io/library/app:1", "docker.io/library/backup:5",
				"docker.io/library/db:2", "docker.io/library/init:latest", "docker.io/library/migrate:4", "registry.example/models:v1"}},
		{name: "spellings of one image count once",
			objs: []client.Object{
				workload(warmv1.KindDeployment, "a", podSpecOf([]string{"nginx"}, []string{"nginx:latest", "docker.io/library/nginx"})),
				workload(warmv1.KindDeployment, "b", podSpecOf(nil, []string{"library/nginx:latest", "nginx:1.27@" + digest, "nginx@" + digest})),
			},
			limit: 100, workloads: 2,
			want: []string{"docker.io/library/nginx:latest", "docker.io/library/nginx@" + digest}},
		{name: "images spec lists are left out",
			spec:  []warmv1.ImageReference{"nginx", "redis:7"},
			objs:  []client.Object{workload(warmv1.KindDeployment, "a", podSpecOf(nil, []string{"docker.io/library/nginx:latest", "redis:7", "app:1"}))},
			limit: 100, workloads: 1, want: []string{"docker.io/library/app:1"}},
		{name: "bounded, the first by name kept",
			objs:  []client.Object{workload(warmv1.KindDeployment, "a", podSpecOf(nil, []string{"c:1", "a:1", "b:1", "d:1"}))},
			limit: 2, workloads: 1, dropped: 2, want: []string{"docker.io/library/a:1", "docker.io/library/b:1"}},
		{name: "bad references reported, the rest kept",
			objs: []client.Object{workload(warmv1.KindDeployment, "a", podSpecOf([]string{"Bad/Name"}, []string{"app:1", "app:-x", " space"})),
				workload(warmv1.KindJob, "j", podSpecOf(nil, []string{"nginx@sha256:short"}))},
			limit: 100, workloads: 2, want: []string{"docker.io/library/app:1"},
			invalid: []string{"Deployment/a initContainers[init0] Bad/Name", "Deployment/a containers[c1] app:-x",
				"Deployment/a containers[c2]  space", "Job/j containers[c0] nginx@sha256:short"}},
		{name: "no workloads", limit: 100, want: []string{}},
		{name: "not a workload is ignored", objs: []client.Object{&corev1.Pod{}}, limit: 100, want: []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Resolve(c.spec, c.objs, c.limit)
			if !slices.Equal(res.Images, c.want) {
				t.Errorf("Images = %q, want %q", res.Images, c.want)
			}
			if res.Workloads != c.workloads || res.Dropped != c.dropped {
				t.Errorf("Workloads, Dropped = %d, %d; want %d, %d", res.Workloads, res.Dropped, c.workloads, c.dropped)
			}
			var invalid []string
			for _, in := range res.Invalid {
				if in.Err == nil {
					t.Errorf("invalid %s without an error", in.Image)
				}
				invalid = append(invalid, in.Workload+" "+in.Where+" "+in.Image)
			}
			if !slices.Equal(invalid, c.invalid) {
				t.Errorf("Invalid = %q, want %q", invalid, c.invalid)
			}
			if res.Hash != Hash(res.Images) || len(res.Hash) != hashLength {
				t.Errorf("Hash %q is not the images' hash", res.Hash)
			}
			st := res.Status()
			if st.Hash != res.Hash || int(st.Dropped) != c.dropped || int(st.Invalid) != len(c.invalid) {
				t.Errorf("Status() = %+v", st)
			}
		})
	}
}

func TestHashTellsSetsApart(t *testing.T) {
	a, b := Hash([]string{"x:1"}), Hash([]string{"x:2"})
	if a == b || Hash(nil) == a || Hash(nil) != Hash([]string{}) || Hash([]string{"a", "b"}) == Hash([]string{"ab"}) {
		t.Errorf("hashes collide: %s %s %s", a, b, Hash(nil))
	}
	if Hash([]string{"x:1"}) != a {
		t.Error("hash not stable")
	}
}

func TestLimit(t *testing.T) {
	if got := Limit([]warmv1.ImageReference{"nginx", "nginx:latest", "redis"}); got != warmv1.MaxImagesPerWarm-2 {
		t.Errorf("Limit = %d, want %d", got, warmv1.MaxImagesPerWarm-2)
	}
	if got := Limit(nil); got != warmv1.MaxImagesPerWarm {
		t.Errorf("Limit(nil) = %d", got)
	}
}

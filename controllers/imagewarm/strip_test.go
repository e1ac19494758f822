package imagewarm

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// TestControllerStripsImageWarms: the controller's cache keeps of an
// ImageWarm everything but the metadata a tenant may make large and the
// controller never reads (labels, annotations, owners, finalizers,
// managed fields): its name, identity, generation, spec and status stay
// as they were.
func TestControllerStripsImageWarms(t *testing.T) {
	now := metav1.Now()
	iw := &warmv1.ImageWarm{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: "web", UID: "uid-1", Generation: 3, ResourceVersion: "42", DeletionTimestamp: &now,
			Labels:          map[string]string{"big": "label"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
			Finalizers:      []string{"example.com/hold"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec:   warmv1.ImageWarmSpec{Images: []warmv1.ImageReference{"registry.example/web:v1"}, ImagePullSecrets: []warmv1.SecretReference{{Name: "regcred"}}},
		Status: warmv1.ImageWarmStatus{ObservedGeneration: 3},
	}
	want := iw.DeepCopy()
	want.Labels, want.Annotations, want.OwnerReferences, want.Finalizers, want.ManagedFields = nil, nil, nil, nil, nil
	out, err := stripImageWarm(iw)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*warmv1.ImageWarm); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("stripped %+v\nwant %+v", got, want)
	}
	if out, err := stripImageWarm("a tombstone"); err != nil || out != "a tombstone" {
		t.Errorf("another object: %v, %v; want it unchanged", out, err)
	}
}

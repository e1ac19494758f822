package build

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DockerConfigSecret builds a kubernetes.io/dockerconfigjson Secret with one
// registry's credentials.
func DockerConfigSecret(ns, name, host, user, pass string) *corev1.Secret {
	cfg := fmt.Sprintf(`{"auths":{%q:{"username":%q,"password":%q}}}`, host, user, pass)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)},
	}
}

package build

import "fmt"

// RealisticRefs are n distinct image references of the lengths people
// write: Docker Hub, a company registry, GitHub's, ECR's long host and
// quay, 47 characters on average. The status budget tests size statuses
// with them.
func RealisticRefs(n int) []string {
	forms := []string{
		"docker.io/library/nginx-%02d:1.27.3",
		"registry.example.com/team/service-%02d:v1.2.3",
		"ghcr.io/example-org/api-gateway-%02d:2025.11.3",
		"123456789012.dkr.ecr.eu-west-1.amazonaws.com/payments/ledger-%02d:v3.14.2",
		"quay.io/prometheus/node-exporter-%02d:v1.8.2",
	}
	refs := make([]string, n)
	for i := range refs {
		refs[i] = fmt.Sprintf(forms[i%len(forms)], i)
	}
	return refs
}

package warmerctl

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// listPage is how many NodeWarms one page of the List brings: 5,000
// nodes come in ten requests of one List, as kubectl get pages them.
const listPage = 500

// Reader reads ImageWarms and NodeWarms: get, list and watch, nothing
// else (the verbs the warmer-viewer ClusterRole grants).
type Reader struct {
	c client.WithWatch
}

// NewReader reads with cfg, the user's own credentials.
func NewReader(cfg *rest.Config) (*Reader, error) {
	scheme := runtime.NewScheme()
	if err := warmv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server: %w", err)
	}
	return &Reader{c: c}, nil
}

// ImageWarm gets one ImageWarm, with an error that says what to check
// when there is none.
func (r *Reader) ImageWarm(ctx context.Context, ns, name string) (*warmv1.ImageWarm, error) {
	iw := &warmv1.ImageWarm{}
	err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, iw)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("ImageWarm %s/%s not found: check the name and namespace (-n); an ImageWarm refused by the API server or an admission policy was never created, and kubectl apply printed why", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("getting ImageWarm %s/%s: %w", ns, name, err)
	}
	return iw, nil
}

// NodeWarms lists every NodeWarm, page by page: one List, never a GET
// per node.
func (r *Reader) NodeWarms(ctx context.Context) ([]warmv1.NodeWarm, error) {
	var out []warmv1.NodeWarm
	opts := &client.ListOptions{Limit: listPage}
	for {
		page := &warmv1.NodeWarmList{}
		if err := r.c.List(ctx, page, opts); err != nil {
			return nil, fmt.Errorf("listing NodeWarms: %w", err)
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// NodeWarm is one node's NodeWarm, by a List with a field selector (list
// is the verb the viewer has on NodeWarms).
func (r *Reader) NodeWarm(ctx context.Context, node string) (*warmv1.NodeWarm, error) {
	list := &warmv1.NodeWarmList{}
	sel := fields.OneTermEqualSelector("metadata.name", node)
	if err := r.c.List(ctx, list, client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing NodeWarm %s: %w", node, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("node %s has no NodeWarm: no warmer agent has reported there (kubectl -n warmer-system get pods -o wide --field-selector spec.nodeName=%s)", node, node)
	}
	return &list.Items[0], nil
}

package criclient

import (
	"context"
	"fmt"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// imageLabels reads and writes the labels of image records in
// containerd's images API, in the CRI plugin's namespace: what pins and
// warmer's other per-image marks are made of.
type imageLabels struct {
	images  imagesapi.ImagesClient
	timeout time.Duration
}

func newImageLabels(conn grpc.ClientConnInterface, timeout time.Duration) imageLabels {
	return imageLabels{images: imagesapi.NewImagesClient(conn), timeout: timeout}
}

// call bounds one call and puts it in the CRI plugin's namespace.
func (l imageLabels) call(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = metadata.AppendToOutgoingContext(ctx, namespaceHeader, criNamespace)
	return context.WithTimeout(ctx, l.timeout)
}

// list returns the image records whose label key has value.
func (l imageLabels) list(ctx context.Context, key, value string) ([]*imagesapi.Image, error) {
	ctx, cancel := l.call(ctx)
	defer cancel()
	resp, err := l.images.List(ctx, &imagesapi.ListImagesRequest{Filters: []string{fmt.Sprintf("labels.%q==%s", key, value)}})
	if err != nil {
		return nil, wrap("images.List", err)
	}
	return resp.GetImages(), nil
}

// get reads one image record, nil when there is none.
func (l imageLabels) get(ctx context.Context, name string) (*imagesapi.Image, error) {
	if err := checkRef("images.Get", name); err != nil {
		return nil, err
	}
	ctx, cancel := l.call(ctx)
	defer cancel()
	resp, err := l.images.Get(ctx, &imagesapi.GetImageRequest{Name: name})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("images.Get", err)
	}
	return resp.GetImage(), nil
}

// set sets the labels keys on img to their values in labels, removing
// those absent from it, and leaves its other labels and its target as
// they are. The target goes along because containerd reads it from every
// update request.
func (l imageLabels) set(ctx context.Context, img *imagesapi.Image, labels map[string]string, keys ...string) error {
	ctx, cancel := l.call(ctx)
	defer cancel()
	paths := make([]string, 0, len(keys))
	for _, k := range keys {
		paths = append(paths, "labels."+k)
	}
	_, err := l.images.Update(ctx, &imagesapi.UpdateImageRequest{
		Image:      &imagesapi.Image{Name: img.GetName(), Target: img.GetTarget(), Labels: labels},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
	})
	return wrap("images.Update", err)
}

package pullengine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// throttledService is an ImageService whose PullImage calls start at most
// qps per second with bursts of burst, like the kubelet's --registry-qps and
// --registry-burst. Unlike the kubelet, which fails a pull over the limit
// and lets back-off retry it, this waits for a token: a queued warm-up pull
// has nothing better to do, and failing would cost it a back-off period.
// Other calls are not throttled: they do not reach the registry.
type throttledService struct {
	ImageService
	limiter flowcontrol.PassiveRateLimiter
	clock   clock.Clock
	// every is 1/qps: after a refused token, the next one is due within it.
	every time.Duration
}

var _ ImageService = &throttledService{}

// Throttle decorates svc with a registry rate limit. With qps <= 0 it
// returns svc itself: no limit. burst < 1 counts as 1.
func Throttle(svc ImageService, qps float32, burst int, c clock.Clock) ImageService {
	if qps <= 0 {
		return svc
	}
	burst = max(burst, 1)
	return &throttledService{
		ImageService: svc,
		limiter:      flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(qps, burst, c),
		clock:        c,
		every:        time.Duration(float64(time.Second) / float64(qps)),
	}
}

// PullImage waits for a token, then pulls.
func (t *throttledService) PullImage(ctx context.Context, ref string, auth *runtimeapi.AuthConfig) (string, error) {
	if err := t.wait(ctx); err != nil {
		return "", fmt.Errorf("waiting for the registry rate limit: %w", err)
	}
	return t.ImageService.PullImage(ctx, ref, auth)
}

// wait polls the bucket at the refill interval; the passive limiter is used
// because client-go's blocking Wait ignores the injected clock.
func (t *throttledService) wait(ctx context.Context) error {
	for !t.limiter.TryAccept() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.clock.After(t.every):
		}
	}
	return nil
}

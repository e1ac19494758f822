package rollout

import (
	"testing"
	"time"

	"github.com/warmer-dev/warmer/controllers/gate"
)

// TestGateControllerDown: a controller killed while Pods are gated leaves
// them gated past their deadline; its successor releases them as soon as
// it leads. A controller stopped cleanly disarms the gate: new Pods are
// created without it.
func TestGateControllerDown(t *testing.T) {
	const ns = "restart"
	image := brokenWarm(t, ns, "slow")
	fleet.Controller.Kill()
	pods := createGated(t, ns, "slow", image, "10s", 2)
	time.Sleep(15 * time.Second)
	stillGated(t, pods) // nobody to release them: the gap the restart closes
	restarted := time.Now()
	fleet.Controller = fleet.StartController(bed)
	released(t, pods, controller.TakeOver()+30*time.Second, gate.ReasonDeadlineExceeded)
	t.Logf("overdue gates released %v after the controller restarted (lease takeover at most %v)",
		time.Since(restarted).Round(time.Second), controller.TakeOver())

	fleet.Controller.Stop()
	waitArmed(t, false)
	fleet.Controller = fleet.StartController(bed)
	waitArmed(t, true)
}

package agent

import (
	"testing"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// TestPullFailureReasonsMatchEngine holds the API's list of pull failure
// reasons equal to the engine's classes: the agent writes a class as a
// NodeWarm image's reason, so a class the API does not name would reach
// users as an undocumented word.
func TestPullFailureReasonsMatchEngine(t *testing.T) {
	classes := pullengine.Classes()
	if len(classes) != len(warmv1.PullFailureReasons) {
		t.Fatalf("engine has %d classes, API lists %d reasons", len(classes), len(warmv1.PullFailureReasons))
	}
	for i, c := range classes {
		if string(c) != warmv1.PullFailureReasons[i] {
			t.Errorf("class %d is %q in the engine, %q in the API", i, c, warmv1.PullFailureReasons[i])
		}
	}
}

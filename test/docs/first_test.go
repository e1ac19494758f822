package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFirstImageWarm: the README's first ImageWarm is
// config/samples/first-imagewarm.yaml, the sample test/cluster
// TestReleaseInstall applies to an install from the release's artifacts:
// what the README promises is what that test shows.
func TestFirstImageWarm(t *testing.T) {
	root := docsRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile(filepath.Join(root, "config", "samples", "first-imagewarm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := fileBlock("config/samples/first-imagewarm.yaml", string(sample)).docs
	if len(want) != 1 || want[0].decode() != nil {
		t.Fatalf("config/samples/first-imagewarm.yaml: want one ImageWarm document")
	}
	for _, b := range yamlBlocks("README.md", string(text)) {
		for _, d := range b.docs {
			if d.decode() == nil && d.obj["kind"] == "ImageWarm" {
				if !reflect.DeepEqual(d.obj, want[0].obj) {
					t.Errorf("%s: the README's first ImageWarm %v differs from config/samples/first-imagewarm.yaml %v", d.where, d.obj, want[0].obj)
				}
				return
			}
		}
	}
	t.Errorf("README.md shows no ImageWarm")
}

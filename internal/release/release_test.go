package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

func TestCheckRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Version: "0.1.0", Registry: "r.example", Dist: "d"}, "want vX.Y.Z"},
		{Options{Version: "v0.1", Registry: "r.example", Dist: "d"}, "want vX.Y.Z"},
		{Options{Version: "v0.1.0-", Registry: "r.example", Dist: "d"}, "want vX.Y.Z"},
		{Options{Version: "v0.1.0", Dist: "d"}, "no registry"},
		{Options{Version: "v0.1.0", Registry: "R_X:x/y", Dist: "d"}, "registry"},
		{Options{Version: "v0.1.0", Registry: "r.example"}, "no dist"},
	} {
		if _, err := tc.opts.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.opts, err, tc.want)
		}
	}
	for _, v := range []string{"v0.1.0", "v1.22.333", "v0.2.0-rc.1", "v0.0.1-earlier"} {
		if _, err := (Options{Version: v, Registry: "127.0.0.1:5000/x", Dist: "d"}).check(); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

// TestPackageChart packages the repo's chart twice: the same bytes, with
// the release's version, appVersion, repository and digest set.
func TestPackageChart(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	digest := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	var archives [][]byte
	for range 2 {
		opts := Options{Dir: root, Version: "v1.2.3-rc.1", Registry: "registry.example/team", Dist: t.TempDir(), Created: time.Unix(1700000000, 0)}
		if err := packageChart(opts, digest); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(opts.Dist, "warmer-1.2.3-rc.1.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two packagings of one tree differ")
	}
	files := untarGz(t, archives[0])
	for file, want := range map[string][]string{
		"warmer/Chart.yaml":  {"\nversion: 1.2.3-rc.1\n", "\nappVersion: \"v1.2.3-rc.1\"\n"},
		"warmer/values.yaml": {"\n  repository: registry.example/team/warmer\n", "\n  digest: \"" + digest.String() + "\"\n"},
	} {
		for _, w := range want {
			if !strings.Contains(files[file], w) {
				t.Errorf("%s lacks %q", file, w)
			}
		}
	}
	if _, ok := files["warmer/templates/agent-daemonset.yaml"]; !ok {
		t.Errorf("no templates in the chart: %v", len(files))
	}
}

func untarGz(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(body)
	}
}

// TestSums checks that a changed or added file fails the check publish
// makes first.
func TestSums(t *testing.T) {
	dist := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dist, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("install.yaml", "a")
	write("warmer-0.1.0.tgz", "b")
	if err := writeSums(dist); err != nil {
		t.Fatal(err)
	}
	if err := checkSums(dist); err != nil {
		t.Fatalf("fresh sums: %v", err)
	}
	write("install.yaml", "changed")
	if err := checkSums(dist); err == nil || !strings.Contains(err.Error(), "install.yaml") {
		t.Errorf("changed file: %v", err)
	}
	write("install.yaml", "a")
	write("extra", "c")
	if err := checkSums(dist); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("added file: %v", err)
	}
}

// TestPlugin builds the plugin for this machine's platform: an archive
// holding the binary and the licence, and a krew manifest whose sha256 is
// the archive's. (make release builds the other platforms alike.)
func TestPlugin(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	opts := Options{Dir: root, Version: "v1.2.3", Dist: t.TempDir(), Created: time.Unix(1700000000, 0), PluginPlatforms: []v1.Platform{host}}
	if err := buildPlugin(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	manifest := readFile(t, opts.Dist, KrewFile)
	var m krewPlugin
	if err := yaml.UnmarshalStrict(manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.Metadata.Name != "warmer" || m.Spec.Version != "v1.2.3" || len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest:\n%s", manifest)
	}
	p := m.Spec.Platforms[0]
	file := filepath.Base(p.URI)
	if p.URI != downloadBase+"v1.2.3/"+PluginArchive(host) || p.Selector.MatchLabels["os"] != host.OS || p.Selector.MatchLabels["arch"] != host.Architecture {
		t.Errorf("platform entry %+v", p)
	}
	if sum, _ := fileSum(filepath.Join(opts.Dist, file)); sum != p.Sha256 {
		t.Errorf("%s: sha256 %s, manifest says %s", file, sum, p.Sha256)
	}
	files := untarGz(t, readFile(t, opts.Dist, file))
	bin := filepath.Join(t.TempDir(), p.Bin)
	if err := os.WriteFile(bin, []byte(files[p.Bin]), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "v1.2.3") {
		t.Errorf("%s --version: %v\n%s", p.Bin, err, out)
	}
	if files["LICENSE"] == "" {
		t.Error("no LICENSE in the archive")
	}
}

// TestArchiveReproducible writes one archive twice: the same bytes.
func TestArchiveReproducible(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"kubectl-warmer": []byte("bin"), "LICENSE": []byte("text")}
	var got [][]byte
	for _, name := range []string{"a.tar.gz", "b.tar.gz"} {
		if err := writeArchive(filepath.Join(dir, name), time.Unix(1700000000, 0), files); err != nil {
			t.Fatal(err)
		}
		got = append(got, readFile(t, dir, name))
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Error("two archives of the same files differ")
	}
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/warmer-dev/warmer/internal/image"
)

// The kubectl plugin's files: an archive per platform and the krew
// manifest that names them with their sha256 (krew-index's
// plugins/warmer.yaml).
const (
	PluginCommand = "./cmd/kubectl-warmer"
	KrewFile      = "warmer-krew.yaml"
	// downloadBase is where users fetch the release's files: the GitHub
	// release of the version (docs/releasing.md attaches dist/ there).
	downloadBase = "https://github.com/warmer-dev/warmer/releases/download/"
)

// PluginPlatforms are where people run kubectl: the plugin's platforms
// unless Options.PluginPlatforms names others.
var PluginPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"}, {OS: "darwin", Architecture: "arm64"},
	{OS: "windows", Architecture: "amd64"},
}

// PluginArchive is the plugin's archive file name for p.
func PluginArchive(p v1.Platform) string {
	return "kubectl-warmer_" + p.OS + "_" + p.Architecture + ".tar.gz"
}

func pluginBinary(p v1.Platform) string {
	if p.OS == "windows" {
		return "kubectl-warmer.exe"
	}
	return "kubectl-warmer"
}

// buildPlugin writes an archive of kubectl-warmer (and the licence) per
// platform into dist, then the krew manifest naming them.
func buildPlugin(ctx context.Context, opts Options) error {
	tmp, err := os.MkdirTemp("", "warmer-plugin-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	license, err := os.ReadFile(filepath.Join(opts.Dir, "LICENSE"))
	if err != nil {
		return err
	}
	sums := map[string]string{}
	for _, p := range opts.PluginPlatforms {
		out := filepath.Join(tmp, p.OS+"-"+p.Architecture, pluginBinary(p))
		cmd := exec.CommandContext(ctx, "go", image.GoBuildPackageArgs(PluginCommand, opts.Version, out)...)
		cmd.Dir, cmd.Env = opts.Dir, image.GoEnv(p)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build kubectl-warmer for %s: %w\n%s", p, err, b)
		}
		bin, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		path := filepath.Join(opts.Dist, PluginArchive(p))
		if err := writeArchive(path, opts.Created, map[string][]byte{pluginBinary(p): bin, "LICENSE": license}); err != nil {
			return err
		}
		if sums[PluginArchive(p)], err = fileSum(path); err != nil {
			return err
		}
	}
	manifest, err := krewManifest(opts.Version, opts.PluginPlatforms, sums)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(opts.Dist, KrewFile), manifest, 0o644)
}

// writeArchive writes files into a tar.gz that depends on nothing but
// them and the time given: sorted names, fixed owners and modes, no
// name or time in the gzip header.
func writeArchive(path string, created time.Time, files map[string][]byte) error {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		mode := int64(0o644)
		if strings.HasPrefix(name, "kubectl-warmer") {
			mode = 0o755
		}
		hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(files[name])), ModTime: created, Format: tar.FormatPAX, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// krewPlugin is krew's Plugin manifest (krew.googlecontainertools.github.com/v1alpha2),
// the fields warmer's uses.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	Sha256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

// krewManifest is the krew manifest of version with each archive's sha256.
func krewManifest(version string, platforms []v1.Platform, sums map[string]string) ([]byte, error) {
	var m krewPlugin
	m.APIVersion, m.Kind, m.Metadata.Name = "krew.googlecontainertools.github.com/v1alpha2", "Plugin", "warmer"
	m.Spec.Version = version
	m.Spec.Homepage = "https://github.com/warmer-dev/warmer"
	m.Spec.ShortDescription = "Follow image pre-warms (warmer) and see why one is not Ready"
	m.Spec.Description = "kubectl warmer shows a warmer ImageWarm's progress live (nodes warm, bytes and\n" +
		"time left, the slowest nodes, failures by reason), says in plain words why it is\n" +
		"not Ready and what to do, and what a node holds for whom. It reads ImageWarms\n" +
		"and NodeWarms with your kubeconfig (ClusterRole warmer-viewer) and writes nothing.\n"
	for _, p := range platforms {
		sum, ok := sums[PluginArchive(p)]
		if !ok {
			return nil, fmt.Errorf("no archive for %s", p)
		}
		kp := krewPlatform{URI: downloadBase + version + "/" + PluginArchive(p), Sha256: sum, Bin: pluginBinary(p)}
		kp.Selector.MatchLabels = map[string]string{"os": p.OS, "arch": p.Architecture}
		m.Spec.Platforms = append(m.Spec.Platforms, kp)
	}
	return yaml.Marshal(m)
}

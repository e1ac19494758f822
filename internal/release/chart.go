package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// chartDir is the chart's folder in the repo, and its name in the archive.
const (
	chartDir  = "charts/warmer"
	chartName = "warmer"
)

// packageChart writes the chart as helm package does (a gzipped tar of
// warmer/...), with the release's version and appVersion in Chart.yaml and
// the image's repository and digest in values.yaml. It is written here
// rather than by helm package, whose archives carry the time of packaging:
// the same commit must give the same bytes. Only files git tracks go in.
func packageChart(opts Options, digest v1.Hash) error {
	files, err := trackedFiles(opts.Dir, chartDir)
	if err != nil {
		return err
	}
	edits := map[string][]edit{
		"Chart.yaml": {
			{regexp.MustCompile(`(?m)^version: .*$`), "version: " + opts.ChartVersion()},
			{regexp.MustCompile(`(?m)^appVersion: .*$`), fmt.Sprintf("appVersion: %q", opts.Version)},
		},
		"values.yaml": {
			{regexp.MustCompile(`(?m)^  repository: ghcr\.io/warmer-dev/warmer$`), "  repository: " + opts.Repository()},
			{regexp.MustCompile(`(?m)^  digest: ""$`), fmt.Sprintf("  digest: %q", digest.String())},
		},
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf) // no name, no time: the same bytes each time
	tw := tar.NewWriter(gz)
	for _, rel := range files {
		body, err := os.ReadFile(filepath.Join(opts.Dir, chartDir, rel))
		if err != nil {
			return err
		}
		for _, e := range edits[rel] {
			if body, err = e.apply(rel, body); err != nil {
				return err
			}
		}
		hdr := &tar.Header{Name: chartName + "/" + rel, Mode: 0o644, Size: int64(len(body)), ModTime: opts.Created, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(opts.Dist, opts.ChartFile()), buf.Bytes(), 0o644)
}

// edit replaces the one line re matches with line.
type edit struct {
	re   *regexp.Regexp
	line string
}

func (e edit) apply(file string, body []byte) ([]byte, error) {
	if n := len(e.re.FindAllIndex(body, -1)); n != 1 {
		return nil, fmt.Errorf("%s/%s: %d lines match %s, want 1: the release sets that line", chartDir, file, n, e.re)
	}
	return e.re.ReplaceAllLiteral(body, []byte(e.line)), nil
}

// trackedFiles lists the files git tracks under dir, relative to it, with
// Chart.yaml first (as helm package writes it) and the rest sorted.
func trackedFiles(root, dir string) ([]string, error) {
	out, err := exec.CommandContext(context.Background(), "git", "-C", root, "ls-files", "-z", "--", dir).Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files %s: %w", dir, err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f != "" {
			files = append(files, strings.TrimPrefix(f, dir+"/"))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("git tracks no file under %s", dir)
	}
	sort.Slice(files, func(i, j int) bool {
		if (files[i] == "Chart.yaml") != (files[j] == "Chart.yaml") {
			return files[i] == "Chart.yaml"
		}
		return files[i] < files[j]
	})
	return files, nil
}

package release

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// writeSums writes SHA256SUMS over every other file of dist, sorted by
// name, in the form sha256sum -c reads.
func writeSums(dist string) error {
	entries, err := os.ReadDir(dist)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == SumsFile {
			continue
		}
		sum, err := fileSum(filepath.Join(dist, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dist, SumsFile), []byte(b.String()), 0o644)
}

// checkSums checks every file SHA256SUMS names, and that it names every
// file of dist: what is published is what was built.
func checkSums(dist string) error {
	f, err := os.Open(filepath.Join(dist, SumsFile))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var named []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			return fmt.Errorf("%s: bad line %q", SumsFile, sc.Text())
		}
		got, err := fileSum(filepath.Join(dist, file))
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: sha256 %s, %s says %s: changed since make release", file, got, SumsFile, want)
		}
		named = append(named, file)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != SumsFile && !slices.Contains(named, e.Name()) {
			return fmt.Errorf("%s is not in %s: not made by make release", e.Name(), SumsFile)
		}
	}
	return nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

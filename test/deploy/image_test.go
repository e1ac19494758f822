package deploy

import (
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/warmer-dev/warmer/test/testbed"
)

// There is no Docker engine on the test machines, so the image is checked
// by parts: the builder stage's own go build command runs on a context made
// the way Docker makes it (the .dockerignore applied, only the COPY'd paths),
// and the result must be a static, stamped, path-free binary; the final
// stage must be distroless and non-root.

// dockerfile is the Dockerfile split into instructions, continuation lines
// joined and comments dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testbed.RepoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

// TestImageBuildsStaticStampedBinary runs the Dockerfile's build on the
// context Docker would send and inspects the binary.
func TestImageBuildsStaticStampedBinary(t *testing.T) {
	root := testbed.RepoRoot(t)
	ctx := t.TempDir()
	allow, deny := dockerignore(t, root)
	var build string
	for _, ins := range dockerfile(t) {
		f := strings.Fields(ins)
		switch {
		case f[0] == "COPY" && !strings.HasPrefix(f[1], "--from"):
			for _, src := range f[1 : len(f)-1] {
				copyContext(t, root, ctx, strings.TrimSuffix(src, "/"), allow, deny)
			}
		case f[0] == "RUN" && strings.Contains(ins, "go build"):
			build = strings.TrimPrefix(ins, "RUN ")
		}
	}
	if build == "" {
		t.Fatal("the Dockerfile has no RUN with go build")
	}
	out := filepath.Join(t.TempDir(), "warmer")
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(build, "/out/warmer", out))
	cmd.Dir = ctx
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH, "VERSION=v0.0.0-imagetest")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build failed on the image's context (is a package missing from COPY?): %v\n%s", err, b)
	}

	checkStatic(t, out, hostMachine(t))
	checkStamp(t, out, "v0.0.0-imagetest")
	info, err := exec.Command("go", "version", "-m", out).CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-trimpath=true", "CGO_ENABLED=0"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("build settings lack %s:\n%s", want, info)
		}
	}
}

// machines are the ELF machine of each architecture the image is built for.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// hostMachine is the ELF machine of this test's own architecture.
func hostMachine(t *testing.T) elf.Machine {
	t.Helper()
	m, ok := machines[runtime.GOARCH]
	if !ok {
		t.Fatalf("no image is built for %s, the architecture of this machine", runtime.GOARCH)
	}
	return m
}

// checkStatic fails unless the binary at path is an ELF executable for
// machine that needs no dynamic loader and no shared library: the image
// has neither.
func checkStatic(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	e, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	if e.Machine != machine {
		t.Errorf("%s is for %v, want %v", path, e.Machine, machine)
	}
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a dynamic loader; the image has none", path)
		}
	}
	if libs, _ := e.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s links %v", path, libs)
	}
}

// checkStamp runs the binary's version command, which must print version.
func checkStamp(t *testing.T, path, version string) {
	t.Helper()
	if v, err := exec.Command(path, "version").CombinedOutput(); err != nil || !strings.Contains(string(v), version) {
		t.Errorf("warmer version = %q (%v), want the stamped %s", v, err, version)
	}
}

// TestImageFinalStage checks the runtime stage: distroless static, a
// numeric non-root user, the binary as entry point.
func TestImageFinalStage(t *testing.T) {
	var from, user, entry string
	for _, ins := range dockerfile(t) {
		f := strings.Fields(ins)
		switch f[0] {
		case "FROM":
			from, user = f[len(f)-1], ""
			if len(f) > 2 && strings.EqualFold(f[len(f)-2], "AS") {
				from = f[len(f)-3]
			}
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entry = strings.Join(f[1:], " ")
		}
	}
	if !strings.HasPrefix(from, "gcr.io/distroless/static") {
		t.Errorf("final stage is FROM %s, want gcr.io/distroless/static", from)
	}
	if !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(user) {
		t.Errorf("final stage USER %q, want a numeric non-root uid:gid (runAsNonRoot cannot check names)", user)
	}
	if entry != `["/warmer"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/warmer\"]", entry)
	}
}

// dockerignore reads the allow-list form the project's .dockerignore uses:
// "*", then "!path/" lines, then "**/pattern" exclusions.
func dockerignore(t *testing.T, root string) (allow map[string]bool, deny []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	allow = map[string]bool{}
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || l == "*":
		case strings.HasPrefix(l, "!"):
			allow[strings.TrimSuffix(l[1:], "/")] = true
		case strings.HasPrefix(l, "**/"):
			deny = append(deny, strings.TrimSuffix(l[3:], "/"))
		default:
			t.Fatalf(".dockerignore line %q is not of the allow-list form this test understands", l)
		}
	}
	return allow, deny
}

// copyContext copies src (relative to root) into ctx as Docker's context
// would hold it.
func copyContext(t *testing.T, root, ctx, src string, allow map[string]bool, deny []string) {
	t.Helper()
	if !allow[src] {
		t.Fatalf("the Dockerfile copies %s, which .dockerignore leaves out of the context", src)
	}
	err := filepath.WalkDir(filepath.Join(root, src), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, pat := range deny {
			if ok, _ := filepath.Match(pat, d.Name()); ok {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(ctx, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(ctx, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

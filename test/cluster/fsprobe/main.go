// Command fsprobe tries, from inside a pod, to create a file in each
// directory given with -write and to read each file given with -read, and
// prints what happened to each as a JSON line on stdout: the test that
// runs it (test/cluster, the RootFilesystems check) decides what may
// succeed. A file it did manage to create is removed at once.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Result is one attempt: Op is "write" or "read"; Stat is the error of a
// stat of Path before the attempt, Err the attempt's; each is an errno's
// name (EROFS), another error's text, or empty for success.
type Result struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Stat string `json:"stat"`
	Err  string `json:"err"`
}

// probeFile is the name of the file -write tries to create.
const probeFile = ".warmer-fsprobe"

type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var writes, reads paths
	flag.Var(&writes, "write", "a directory to create a file in (repeatable)")
	flag.Var(&reads, "read", "a file to read (repeatable)")
	flag.Parse()
	enc := json.NewEncoder(os.Stdout)
	for _, dir := range writes {
		emit(enc, tryWrite(dir))
	}
	for _, path := range reads {
		emit(enc, tryRead(path))
	}
}

func emit(enc *json.Encoder, r Result) {
	if err := enc.Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func tryWrite(dir string) Result {
	r := Result{Op: "write", Path: dir, Stat: stat(dir)}
	name := filepath.Join(dir, probeFile)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		_ = f.Close()
		err = os.Remove(name)
		if err != nil {
			err = fmt.Errorf("created %s, and could not remove it: %w", name, err)
		}
	}
	r.Err = errName(err)
	return r
}

func tryRead(path string) Result {
	r := Result{Op: "read", Path: path, Stat: stat(path)}
	f, err := os.Open(path)
	if err == nil {
		_, err = f.Read(make([]byte, 1))
		_ = f.Close()
	}
	r.Err = errName(err)
	return r
}

func stat(path string) string {
	_, err := os.Stat(path)
	return errName(err)
}

// errName is an errno's name, so that the test need not know its number.
func errName(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

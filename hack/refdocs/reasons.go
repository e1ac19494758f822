package main
import "bytes"
func writeReasons(w *bytes.Buffer, root string) error { return nil }

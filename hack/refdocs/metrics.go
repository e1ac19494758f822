package main
import "bytes"
func writeMetrics(w *bytes.Buffer, root string) error { return nil }

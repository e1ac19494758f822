// Package imageref parses and normalises container image references the
// way the kubelet does (docker.io and library/ filled in, :latest when
// there is neither tag nor digest). Both controllers and the pull engine
// use it, so that "nginx" and "docker.io/library/nginx:latest" are one
// image everywhere, and the ImageWarm controller needs no pull engine to
// know that.
package imageref

// Package image builds warmer's release image from source without a
// container engine: it cross-compiles cmd/warmer for each platform the way
// the Dockerfile's builder stage does, packs each binary into one layer
// with the files a distroless "nonroot" base would add (/etc/passwd,
// /etc/group with uid and gid 65532, a sticky /tmp), and ties the
// platforms together in one OCI image index, written as an OCI image
// layout in a tar file.
//
// Everything that goes into the image is fixed by the source, the Go
// toolchain and the options: file times and the image's creation time come
// from Options.Created, the Go build ignores the environment's GOFLAGS and
// records no VCS state, and layers are compressed by the standard library.
// The same commit so gives the same index digest.
//
// Files:
//   - build.go: Options and Build, the whole build.
//   - compile.go: the go build command, shared with the Dockerfile's.
//   - layer.go: the one layer of each platform's image.
//   - oci.go: the OCI layout tarball.
package image

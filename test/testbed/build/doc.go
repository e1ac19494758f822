// Package build makes the Kubernetes objects tests create, in memory and
// nothing more: it starts no process and talks to no API server, so a
// unit test may use it as freely as an end-to-end one. A builder takes
// what every such object needs (namespace and name) and options for the
// rest; an option is a function that sets one part of the object, so a
// call names only what the test cares about:
//
//	build.ImageWarm(ns, "web", build.Images(a.Ref, b.Ref), build.MatchLabel("pool", "web"))
//
// A field no option sets, the test sets on the object returned.
//
//   - imagewarm.go: ImageWarm and its options (ImageWarmOption): Images,
//     MatchLabel, Selector. imagewarm_test.go checks what each sets.
//   - secret.go: DockerConfigSecret, a kubernetes.io/dockerconfigjson
//     Secret with one registry's credentials.
//   - refs.go: RealisticRefs, image references of realistic lengths, for
//     the status size budgets.
//
// The test bed itself (package testbed) creates these objects on the
// clusters it starts (Fleet.Create); this package does not import it.
package build

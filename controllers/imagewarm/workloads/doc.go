// Package workloads reads the images of workloads' pod templates for an
// ImageWarm's spec.imagesFrom: which images a Deployment, StatefulSet,
// DaemonSet, Job or CronJob names (templates.go), how the controller's
// cache keeps no more of those objects than that (transform.go), and how
// the images of the selected workloads become one bounded, deduplicated,
// normalised set with a hash agents echo back (resolve.go).
//
// Only the controller uses it: agents never read workloads, they read the
// resolved set from the ImageWarm's status.
package workloads

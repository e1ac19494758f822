// Package pullsecrets holds the controller that gives each node the pull
// credentials of the ImageWarms that select it, and no others: one Secret
// per node in warmer's namespace, sealed to the public key the node's
// agent publishes in its NodeWarm (internal/credbundle says why).
//
// For each node with a published key, the Bundler works out which
// ImageWarms select the node (plan.go, the agent's own rule), reads the
// pull secrets they name by GET (sources.go), and seals what it read, or
// why it could not, into the node's bundle. It never lists or watches
// Secrets outside its namespace, so a source is read again every Resync;
// where it may read is each namespace admin's choice (a RoleBinding to
// ReaderRole, or a Role narrowed to named Secrets; docs/operations.md).
//
// Nodes are worked on in a queue by several workers, and a node's sources
// are read side by side with a timeout each: one namespace's slow or
// refused reads do not hold up another's. A bundle is written only when
// its inputs changed (the key, and each source's namespace, name and
// resourceVersion), and goes with its NodeWarm.
package pullsecrets

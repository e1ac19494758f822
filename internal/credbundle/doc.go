// Package credbundle is the contract between the controller, which seals
// each node's pull credentials into one Secret in warmer's namespace (the
// node's bundle), and that node's agent, the only holder of the key that
// opens it.
//
// Every agent may GET Secrets in warmer's namespace: RBAC cannot give each
// agent of a DaemonSet its own resourceNames, since one Role serves them
// all. What protects a bundle is that it is sealed (HPKE, RFC 9180) to the
// public key its node's agent publishes in its NodeWarm, and bound to the
// node's name and that key: root on one node opens that node's bundle and
// no other, so it learns the pull credentials of the ImageWarms that
// select that node, as the kubelet's promise for Pods is.
//
// The agent makes its key pair when it starts and keeps the private half
// in memory only. A restart makes a new key; the controller seals again
// within seconds of the new key being published. Nothing on the node's
// disk holds a key a thief could carry off.
package credbundle

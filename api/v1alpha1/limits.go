package v1alpha1

// The API's bounds, and the arithmetic that sets them.
//
// Every write of an object goes through two limits: the API server takes a
// request body of at most 3 MiB, and etcd, where the object is stored as
// JSON, takes a request of at most 1.5 MiB (its default
// --max-request-bytes). An object larger than that can be neither created
// nor updated: an agent asked for too many images could never report.
// The bounds below are chosen so that the largest object validation lets
// through stays under StatusBudget (1 MiB), which leaves 512 KiB of etcd's
// limit for the object's metadata (annotations alone may take 256 KiB, the
// API server's own cap), its managedFields, the key and the request's
// framing. etcd's limit is the binding one; the body limit is twice it.
//
// "Largest" counts bytes as stored, not characters as validated: JSON
// writes some characters in six bytes (\u003c for <, for one). Fields that
// repeat per image or per ImageWarm are therefore plain text (a pattern
// keeps out every character JSON escapes), and free-text fields are
// counted at six bytes a character. TestWorstCaseSizes builds the largest
// objects from the generated CRDs, every string at its longest with its
// widest characters and every list full, marshals them and checks them
// against StatusBudget; TestAPI writes one to a real API server.
//
// NodeWarm, per image (NodeImage), worst case 1,416 bytes: image 544
// (a 512-character spec reference, normalised) + digest 135 + reason 32 +
// message 224 characters of plain text + secretsNamespace 63, a count at
// its longest, two timestamps (lastTransitionTime, retryAt), 16 indices
// of up to three digits, verified, pinned, a pull's progress (bytes
// done, total and unpacked bounded to 15 digits, seconds to 7), and the
// keys: 512 of them take 725 KB. The warms list takes 512 x 437 bytes (a
// 63-character namespace, a 253-character name, a 19-digit generation, a
// 16-digit hash of the resolved images, a served count of six digits) =
// 224 KB; conditions (8, messages capped at 768 characters by a rule, 6
// bytes each) 38 KB; runtime, image filesystem and the node's progress
// 27 KB. 1,046,069 bytes (1.00 MiB) in all: under StatusBudget, with
// 2.5 KB to spare. A new per-image field needs its room made elsewhere
// (fewer entries, a shorter bound), as retryAt and bytesUnpacked took
// theirs from the reasons' and messages' bounds (an entry's phase is
// told by its bytes, PhaseOf, for the same reason). 1,024
// images would take 1.5 MiB: 512 is the bound.
//
// ImageWarm: the spec at MaxImagesPerWarm takes about 52 KB, the status
// (MaxReportedImages entries, MaxReportedFailures failures, capped
// conditions, the resolved images of imagesFrom, free text at six bytes)
// 517 KB: under the budget. MaxImagesPerWarm is set by
// the node instead: five ImageWarms of MaxImagesPerWarm distinct images
// must fit in one node's report (5 x 100 <= MaxNodeImages).
//
// Below the hard bounds, each status has a budget for what a real cluster
// writes (tested in controllers and controllers/agent, reported by `make
// bench`): NodeImageBudget bytes for a present image's entry, and
// ImageWarmStatusBudget for the status of an ImageWarm of MaxImagesPerWarm
// images, whatever the number of nodes.
const (
	// EtcdRequestLimit is etcd's default --max-request-bytes: the largest
	// write etcd takes, the stored object included.
	EtcdRequestLimit = 1536 << 10
	// APIServerBodyLimit is the largest request body the API server reads.
	APIServerBodyLimit = 3 << 20
	// StatusBudget is the most the largest valid object may take as stored,
	// leaving the rest of EtcdRequestLimit to metadata and framing.
	StatusBudget = 1 << 20

	// NodeImageBudget is the most a present image's entry in a NodeWarm
	// may take, as stored, for a reference of realistic length.
	NodeImageBudget = 200
	// ImageWarmStatusBudget is the most an ImageWarm status of
	// MaxImagesPerWarm images may take, as stored, at any node count.
	ImageWarmStatusBudget = 8 << 10
)

// Bounds of a NodeWarm.
const (
	// MaxNodeImages is the most images one NodeWarm reports.
	MaxNodeImages = 512
	// MaxNodeWarms is the most ImageWarms one NodeWarm lists.
	MaxNodeWarms = 512
	// MaxRequestedBy is the most ImageWarms listed as wanting one image.
	MaxRequestedBy = 16
	// MaxNodeMessageLength is the longest message kept per image in a
	// NodeWarm: 32 characters fewer than an ImageWarm's, with reasons of
	// 32, made the room of retryAt and bytesUnpacked (the arithmetic
	// above).
	MaxNodeMessageLength = 224
	// MaxConditionMessageLength is the longest condition message an
	// ImageWarm takes (metav1.Condition's own bound is 32768).
	MaxConditionMessageLength = 1024
	// MaxNodeConditionMessageLength is the longest condition message a
	// NodeWarm takes: 256 characters fewer than an ImageWarm's make the
	// room of the warms' served counts.
	MaxNodeConditionMessageLength = 768
)

// Bounds of an ImageWarm.
const (
	// MaxImagesPerWarm is the most images one ImageWarm may list.
	MaxImagesPerWarm = 100
	// MaxArtifactsPerWarm is the most artifacts one ImageWarm may list;
	// with its images, at most MaxImagesPerWarm references.
	MaxArtifactsPerWarm = 20
	// MaxPullSecrets is the most pull secrets one ImageWarm may name.
	MaxPullSecrets = 8
	// MaxReportedImages is the most images an ImageWarm's status lists.
	MaxReportedImages = 20
	// MaxReportedFailures is the most node failures an ImageWarm's status lists.
	MaxReportedFailures = 10
	// MaxMessageLength is the longest message kept in a status; longer runtime
	// messages are cut.
	MaxMessageLength = 256
)

package v1alpha1

// RequestedBy returns the ImageWarms that want img, an entry of s.Images,
// by resolving its indices into s.Warms. An index out of range (a status
// written by hand) is skipped.
func (s *NodeWarmStatus) RequestedBy(img *NodeImage) []WarmRef {
	out := make([]WarmRef, 0, len(img.Warms))
	for _, i := range img.Warms {
		if i >= 0 && int(i) < len(s.Warms) {
			out = append(out, s.Warms[i])
		}
	}
	return out
}

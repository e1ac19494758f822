package testbed

// Catalog is the standard set of test images.
type Catalog struct {
	// Small (1 MB), Medium (20 MB) and Large (100 MB) are one-layer images.
	Small, Medium, Large Image
	// Layered has three 2 MB layers and OCI media types.
	Layered Image
	// MultiArch is an index with amd64 and arm64 children.
	MultiArch Image
	// ArmOnly is an index with only an arm64 child: no match on amd64.
	ArmOnly Image
	// Private lives on the authenticated registry.
	Private Image
}

// Registries is a pair of test registries: one anonymous, one with basic auth.
type Registries struct {
	Anon, Auth *Registry
}

// StartRegistries starts an anonymous and an authenticated registry.
func StartRegistries(t TB) Registries {
	t.Helper()
	return Registries{
		Anon: StartRegistry(t, RegistryOptions{Name: "anon"}),
		Auth: StartRegistry(t, RegistryOptions{Name: "auth", Username: "warmer", Password: "s3cret-" + randomToken()}),
	}
}

// LoadCatalog pushes the standard images: what every pull test needs.
// Large (100 MB) is only made when withLarge is set, since it costs seconds.
func (rs Registries) LoadCatalog(t TB, withLarge bool) Catalog {
	t.Helper()
	c := Catalog{
		Small:     rs.Anon.PushRandom(t, "test/small:v1", ImageOptions{LayerSize: 1 * MB}),
		Medium:    rs.Anon.PushRandom(t, "test/medium:v1", ImageOptions{LayerSize: 20 * MB}),
		Layered:   rs.Anon.PushRandom(t, "test/layered:v1", ImageOptions{LayerSize: 2 * MB, Layers: 3, OCI: true}),
		MultiArch: rs.Anon.PushIndex(t, "test/multiarch:v1", 1*MB, "amd64", "arm64"),
		ArmOnly:   rs.Anon.PushIndex(t, "test/armonly:v1", 1*MB, "arm64"),
		Private:   rs.Auth.PushRandom(t, "private/app:v1", ImageOptions{LayerSize: 1 * MB}),
	}
	if withLarge {
		c.Large = rs.Anon.PushRandom(t, "test/large:v1", ImageOptions{LayerSize: 100 * MB})
	}
	return c
}

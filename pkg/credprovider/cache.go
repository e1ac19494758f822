package credprovider

import (
	"time"

	credv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"

	"github.com/warmer-dev/warmer/pkg/pullengine"
)

// globalKey is the cache key of a Global answer.
const globalKey = "*"

// cache holds one provider's answers until they expire. It is guarded by
// its provider's lock.
type cache struct {
	entries map[string]cacheEntry
}

type cacheEntry struct {
	ring    *pullengine.Keyring
	expires time.Time
}

// lookup returns the answer cached for image: under its own key, its
// registry's, or the global one, in that order, as the kubelet looks.
// Expired answers are dropped on the way.
func (c *cache) lookup(image string, now time.Time) (*pullengine.Keyring, bool) {
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	for _, k := range []string{image, registryOf(image), globalKey} {
		if e, ok := c.entries[k]; ok {
			return e.ring, true
		}
	}
	return nil, false
}

// store keeps an answer for d under the key its cacheKeyType names. A
// zero duration keeps nothing: the plugin is asked again next time.
func (c *cache) store(image string, keyType credv1.PluginCacheKeyType, ring *pullengine.Keyring, d time.Duration, now time.Time) {
	if d <= 0 {
		return
	}
	if c.entries == nil {
		c.entries = map[string]cacheEntry{}
	}
	c.entries[cacheKey(image, keyType)] = cacheEntry{ring: ring, expires: now.Add(d)}
}

// cacheKey is the key an answer of keyType is kept under. keyType has been
// checked (decodeResponse).
func cacheKey(image string, keyType credv1.PluginCacheKeyType) string {
	switch keyType {
	case credv1.RegistryPluginCacheKeyType:
		return registryOf(image)
	case credv1.GlobalPluginCacheKeyType:
		return globalKey
	default:
		return image
	}
}

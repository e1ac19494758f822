package credbundle

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	warmv1 "github.com/warmer-dev/warmer/api/v1alpha1"
)

// The suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20Poly1305,
// all in the standard library. X25519 keys are 32 bytes, small enough
// for a NodeWarm's status; the one-shot (base mode) seal fits a bundle
// written whole each time.
var (
	kem  = hpke.DHKEM(ecdh.X25519())
	kdf  = hpke.HKDFSHA256()
	aead = hpke.ChaCha20Poly1305()
)

// infoPrefix versions the binding below, so a later format never opens
// as this one.
const infoPrefix = "warmer.dev/credential-bundle/v1"

// ErrNotOpened is a bundle that does not open with the key and node
// given: sealed to another key, for another node, or altered.
var ErrNotOpened = errors.New("credential bundle does not open with this agent's key for this node")

// KeyPair is an agent's credential key pair. The private half never
// leaves the process.
type KeyPair struct {
	priv hpke.PrivateKey
}

// NewKeyPair makes a fresh key pair.
func NewKeyPair() (*KeyPair, error) {
	priv, err := kem.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("making the credential key: %w", err)
	}
	return &KeyPair{priv: priv}, nil
}

// Public is the public key as published in the NodeWarm's status.
func (k *KeyPair) Public() warmv1.CredentialKey {
	return warmv1.CredentialKey{KEM: int32(kem.ID()), PublicKey: k.priv.PublicKey().Bytes()}
}

// Fingerprint names a public key in a bundle's annotation, so an agent
// tells a bundle sealed to an earlier key of its own (not re-sealed yet)
// from one that is damaged. It reveals nothing the NodeWarm does not.
func Fingerprint(pub warmv1.CredentialKey) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%x", pub.KEM, pub.PublicKey))
	return hex.EncodeToString(sum[:16])
}

// info binds a seal to the node's name and the key it was sealed to: a
// bundle copied into another node's Secret, or sealed to another key,
// does not open.
func info(node string, pub []byte) []byte {
	var b bytes.Buffer
	b.WriteString(infoPrefix)
	b.WriteByte(0)
	b.WriteString(node)
	b.WriteByte(0)
	b.Write(pub)
	return b.Bytes()
}

// Seal seals b for node to pub.
func Seal(node string, pub warmv1.CredentialKey, b *Bundle) ([]byte, error) {
	if pub.KEM != int32(kem.ID()) {
		return nil, fmt.Errorf("credential key of node %q: KEM %d; warmer seals to %d only", node, pub.KEM, kem.ID())
	}
	pk, err := kem.NewPublicKey(pub.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("credential key of node %q: %w", node, err)
	}
	plain, err := json.Marshal(Bundle{Node: node, Secrets: b.Secrets})
	if err != nil {
		return nil, err
	}
	return hpke.Seal(pk, kdf, aead, info(node, pub.PublicKey), plain)
}

// Open opens a bundle sealed for node to k's public key. Its error never
// carries the bundle's content.
func (k *KeyPair) Open(node string, sealed []byte) (*Bundle, error) {
	plain, err := hpke.Open(k.priv, kdf, aead, info(node, k.priv.PublicKey().Bytes()), sealed)
	if err != nil {
		return nil, ErrNotOpened
	}
	var b Bundle
	if err := json.Unmarshal(plain, &b); err != nil || b.Node != node {
		return nil, ErrNotOpened
	}
	return &b, nil
}

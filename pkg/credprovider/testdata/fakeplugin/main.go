// Command fakeplugin is a credential-provider plugin for tests: it reads a
// CredentialProviderRequest on stdin and answers as its flags say, with
// the login in $FAKE_USERNAME and $FAKE_PASSWORD (set through the
// provider's env in the configuration, as a real deployment would pass
// settings). Each run appends the requested image to the --count file,
// so a test can tell how often the plugin ran.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	mode := flag.String("mode", "ok", "ok, exit, badjson, sleep or wrongversion")
	count := flag.String("count", "", "file to append each requested image to")
	keyType := flag.String("key-type", "Image", "cacheKeyType to answer")
	duration := flag.String("cache-duration", "", "cacheDuration to answer; empty: none")
	authKey := flag.String("auth-key", "", "auth key to answer; empty: the image's registry")
	flag.Parse()

	var req struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Image      string `json:"image"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil || req.Kind != "CredentialProviderRequest" {
		fmt.Fprintln(os.Stderr, "bad request", err)
		os.Exit(3)
	}
	if *count != "" {
		f, err := os.OpenFile(*count, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, req.Image)
			_ = f.Close()
		}
	}
	pass := os.Getenv("FAKE_PASSWORD")
	switch *mode {
	case "exit":
		// A careless plugin prints the secret on stderr before failing.
		fmt.Fprintln(os.Stderr, "failing with password", pass)
		os.Exit(2)
	case "badjson":
		fmt.Printf("{\"password\": %q, not json", pass)
		return
	case "sleep":
		time.Sleep(time.Hour)
	case "wrongversion":
		req.APIVersion = "credentialprovider.kubelet.k8s.io/v9"
	}
	key := *authKey
	if key == "" {
		key, _, _ = strings.Cut(req.Image, "/")
	}
	resp := map[string]any{
		"apiVersion":   req.APIVersion,
		"kind":         "CredentialProviderResponse",
		"cacheKeyType": *keyType,
		"auth":         map[string]any{key: map[string]string{"username": os.Getenv("FAKE_USERNAME"), "password": pass}},
	}
	if *duration != "" {
		resp["cacheDuration"] = *duration
	}
	_ = json.NewEncoder(os.Stdout).Encode(resp)
}

// Command fakeplugin is a credential-provider plugin for tests: it reads a
// CredentialProviderRequest on stdin and answers as its flags say, with
// the login in $FAKE_USERNAME and $FAKE_PASSWORD (set through the
// provider's env in the configuration, as a real deployment would pass
// settings). Each run appends the requested image to the --count file,
// so a test can tell how often the plugin ran.
//
// With --token-url it behaves as a cloud's plugin does: the password is a
// token it fetches over HTTPS, the server verified against the system's CA
// bundle, and with --cloud-config it first reads a client id and secret
// from a JSON file with azure.json's keys and sends them as basic auth.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
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
	tokenURL := flag.String("token-url", "", "HTTPS URL whose answer is the password")
	cloudConfig := flag.String("cloud-config", "", "JSON file with aadClientId and aadClientSecret, sent to --token-url as basic auth")
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
	if *tokenURL != "" {
		var err error
		if pass, err = fetchToken(*tokenURL, *cloudConfig); err != nil {
			fmt.Fprintln(os.Stderr, "fetching the token:", err)
			os.Exit(2)
		}
	}
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

// fetchToken GETs url with Go's default client, which verifies the server
// against the system's CA bundle, sending the client id and secret of the
// cloud config file (if any) as basic auth; the answer is the token.
func fetchToken(url, cloudConfig string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if cloudConfig != "" {
		raw, err := os.ReadFile(cloudConfig)
		if err != nil {
			return "", err
		}
		var cfg struct {
			ClientID     string `json:"aadClientId"`
			ClientSecret string `json:"aadClientSecret"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return "", fmt.Errorf("%s: %w", cloudConfig, err)
		}
		req.SetBasicAuth(cfg.ClientID, cfg.ClientSecret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token service answered %s", resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}

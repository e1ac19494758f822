// Command hello is test/cluster's first workload: run in a pod, it says
// hello and asks the API server, with the pod's own ServiceAccount token,
// who it is (a SelfSubjectReview), then exits. Its output shows that the
// pod started from an image in the test registry, that the token the
// kubelet mounted works and is bound to the pod and its node, and that the
// API server is reachable from the pod. With the argument "sleep" it waits
// for SIGTERM instead, a container to kubectl exec into.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sleep" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		return
	}
	fmt.Println("hello from the test bed")
	user, node, err := whoAmI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
	fmt.Printf("user=%s node=%s\n", user, node)
}

// whoAmI returns the username and the node-name claim the API server sees
// in this pod's token.
func whoAmI() (string, string, error) {
	token, err := os.ReadFile(saDir + "token")
	if err != nil {
		return "", "", err
	}
	ca, err := os.ReadFile(saDir + "ca.crt")
	if err != nil {
		return "", "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", "", fmt.Errorf("no certificate in %sca.crt", saDir)
	}
	c := http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	host := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, "https://"+host+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("SelfSubjectReview: %s", resp.Status)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string              `json:"username"`
				Extra    map[string][]string `json:"extra"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return "", "", err
	}
	u := review.Status.UserInfo
	return u.Username, strings.Join(u.Extra["authentication.kubernetes.io/node-name"], ","), nil
}

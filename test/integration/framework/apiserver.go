package framework

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned"
)

// writeCredentials creates what kube-apiserver needs to authenticate and be
// trusted: a serving certificate signed by a fresh CA, a front-proxy client
// certificate (signed by a CA of its own) that it presents to aggregated API
// servers such as metrics-server, a service account signing key, a static
// admin token in system:masters, and a kubeconfig with that token for the
// other components.
func (cp *ControlPlane) writeCredentials() error {
	var err error
	if cp.ca, err = newCertAuthority("scaleplane-test-ca"); err != nil {
		return err
	}
	certs, err := cp.ca.issue(x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	if _, _, cp.caFile, err = certs.WriteFiles(cp.dir, "apiserver"); err != nil {
		return err
	}
	proxyCA, err := newCertAuthority("scaleplane-test-front-proxy-ca")
	if err != nil {
		return err
	}
	proxyClient, err := proxyCA.issue(x509.ExtKeyUsageClientAuth, frontProxyClientName)
	if err != nil {
		return err
	}
	if _, _, _, err = proxyClient.WriteFiles(cp.dir, "front-proxy-client"); err != nil {
		return err
	}
	cp.saKey = filepath.Join(cp.dir, "service-account.key")
	if err := writeServiceAccountKey(cp.saKey); err != nil {
		return err
	}
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("generating the admin token: %w", err)
	}
	cp.token = hex.EncodeToString(buf)
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", cp.token)
	if err := os.WriteFile(filepath.Join(cp.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	return nil
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	bin, err := binary("kube-apiserver")
	if err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < startAttempts; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		args := []string{
			"--etcd-servers=" + cp.etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// The endpoint reconciler publishes the advertise address as the
			// "kubernetes" service's endpoint and refuses a loopback one; no
			// pod here needs to reach the apiserver through that service.
			"--endpoint-reconciler-type=none",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--tls-cert-file=" + filepath.Join(cp.dir, "apiserver.crt"),
			"--tls-private-key-file=" + filepath.Join(cp.dir, "apiserver.key"),
			"--client-ca-file=" + cp.caFile,
			"--token-auth-file=" + filepath.Join(cp.dir, "tokens.csv"),
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + cp.saKey,
			"--service-account-signing-key-file=" + cp.saKey,
			"--service-cluster-ip-range=10.0.0.0/24",
			// Without kube-controller-manager nobody creates the "default"
			// service account, and the ServiceAccount admission plugin would
			// then reject every pod; tests care about scaling, not tokens.
			"--disable-admission-plugins=ServiceAccount",
			"--cert-dir=" + filepath.Join(cp.dir, "apiserver-certs"),
			"--profiling=false",
		}
		args = append(args, frontProxyArgs(cp.dir)...)
		args = append(args, cp.opts.ExtraAPIServerArgs...)
		p, err := startProcess(cp.dir, "kube-apiserver", bin, args)
		if err != nil {
			return err
		}
		cp.setAPIServer(p)
		host := "https://127.0.0.1:" + strconv.Itoa(ports[0])
		tlsConfig, err := cp.clientTLSConfig()
		if err != nil {
			return err
		}
		header := http.Header{"Authorization": []string{"Bearer " + cp.token}}
		if lastErr = waitHTTP(ctx, p, host+"/readyz", tlsConfig, header, apiserverStartTimeout); lastErr == nil {
			cp.host = host
			cp.mu.Lock()
			cp.apiserverArgs = args
			cp.mu.Unlock()
			return nil
		}
		p.stop(stopGrace)
	}
	return fmt.Errorf("kube-apiserver did not become ready: %w", lastErr)
}

func (cp *ControlPlane) clientTLSConfig() (*tls.Config, error) {
	caData, err := os.ReadFile(cp.caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver CA: %w", err)
	}
	pool, err := certPool(caData)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

func (cp *ControlPlane) makeClients() error {
	caData, err := os.ReadFile(cp.caFile)
	if err != nil {
		return fmt.Errorf("reading the apiserver CA: %w", err)
	}
	cp.config = &rest.Config{
		Host:            cp.host,
		BearerToken:     cp.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData},
		// Tests create objects in bursts; client-side throttling would only
		// make them slower and timing-dependent.
		QPS:   1000,
		Burst: 2000,
	}
	if cp.kubeClient, err = kubernetes.NewForConfig(cp.Config()); err != nil {
		return fmt.Errorf("creating the kube clientset: %w", err)
	}
	if cp.client, err = versioned.NewForConfig(cp.Config()); err != nil {
		return fmt.Errorf("creating the scaleplane clientset: %w", err)
	}
	if cp.dynamicClient, err = dynamic.NewForConfig(cp.Config()); err != nil {
		return fmt.Errorf("creating the dynamic client: %w", err)
	}

	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["scaleplane-test"] = &clientcmdapi.Cluster{Server: cp.host, CertificateAuthorityData: caData}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.token}
	kubeconfig.Contexts["scaleplane-test"] = &clientcmdapi.Context{Cluster: "scaleplane-test", AuthInfo: "admin"}
	kubeconfig.CurrentContext = "scaleplane-test"
	cp.kubecfg = filepath.Join(cp.dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, cp.kubecfg); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return nil
}

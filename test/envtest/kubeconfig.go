package envtest

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigFromREST serialises cfg as a kubeconfig with one context, for
// subprocesses (Cluster API's core manager, the monolith binary, kubectl).
// Credentials are kept inline when cfg has them inline and as file paths when
// cfg points at files.
func KubeconfigFromREST(cfg *rest.Config) ([]byte, error) {
	if cfg == nil {
		return nil, fmt.Errorf("failed to write a kubeconfig: no rest config given")
	}
	const name = "envtest"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host + cfg.APIPath,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("failed to serialise the kubeconfig: %w", err)
	}
	return out, nil
}

// WriteKubeconfigFromREST writes KubeconfigFromREST(cfg) to path, readable by
// the owner only because it holds the admin's credentials.
func WriteKubeconfigFromREST(cfg *rest.Config, path string) error {
	out, err := KubeconfigFromREST(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	return nil
}

// Package kubeconfig writes the kubeconfig files of the dev environment: the
// one handed to users and the one its child processes read.
package kubeconfig

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultContextName names the cluster, user and context of FromREST's output.
const DefaultContextName = "capi-monolith-dev"

// FromREST serialises cfg as a kubeconfig with one context named name
// (DefaultContextName when empty). Credentials are kept inline when cfg has
// them inline and as file paths when cfg points at files.
func FromREST(cfg *rest.Config, name string) ([]byte, error) {
	if cfg == nil {
		return nil, fmt.Errorf("failed to write a kubeconfig: no rest config given")
	}
	if name == "" {
		name = DefaultContextName
	}
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

// WriteFromREST writes FromREST(cfg) to path, readable by the owner only
// because it holds the admin's credentials. The file is replaced atomically,
// so a reader never sees half of it.
func WriteFromREST(cfg *rest.Config, path string) error {
	out, err := FromREST(cfg, "")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to write the kubeconfig: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("failed to write the kubeconfig %s: %w", path, err)
	}
	return nil
}

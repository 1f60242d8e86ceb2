package secretjournal_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-monolith/capi-monolith/infra/internal/workload/secretjournal"
	"github.com/capi-monolith/capi-monolith/infra/internal/workload/store"
	"github.com/capi-monolith/capi-monolith/test/envtest"
)

var env *envtest.Environment

// writerEnv names the kubeconfig of the writer subprocess: the test binary
// run again as a process the tests SIGKILL.
const writerEnv = "SECRETJOURNAL_WRITER_KUBECONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		if err := writer(path, os.Getenv("SECRETJOURNAL_WRITER_NAMESPACE")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	envtest.Main(m, &env, envtest.Options{})
}

var configMaps = store.Resource{Resource: "configmaps", Namespaced: true}

// writer creates ConfigMaps from 16 goroutines into a store kept by a
// journal, and prints "ack <name>" for each once Wait returned: what the
// workload API answers a client. It runs until killed.
func writer(kubeconfig, namespace string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	j, restored, _, err := secretjournal.Open(context.Background(), secretjournal.Options{
		Client: c, Cluster: types.NamespacedName{Namespace: namespace, Name: "killed"}, Resume: true,
	})
	if err != nil {
		return err
	}
	s := store.New(store.Options{Restored: restored, Journal: j})
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				name := "cm-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if _, err := s.Create(configMaps, configMap(name, "v")); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				if err := j.Wait(context.Background()); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				mu.Lock()
				fmt.Println("ack " + name)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return nil
}

func configMap(name, value string) *unstructured.Unstructured {
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("default")
	cm.SetName(name)
	_ = unstructured.SetNestedField(cm.Object, value, "data", "value")
	return cm
}

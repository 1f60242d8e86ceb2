package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/capi-monolith/capi-monolith/test/bench/harness"
)

// addonNamespace holds the addon set in every workload cluster.
const addonNamespace = "bench-addon"

// servedAgainTimeout bounds the wait, after dev restarts, for every
// workload cluster to answer.
const servedAgainTimeout = 10 * time.Minute

// StateResult is the persistence phase's figures: what a workload
// cluster's objects cost kept in memory and in dev's state folder, and how
// long a restarted dev takes to serve every cluster again.
type StateResult struct {
	// AddonObjects were written into every workload cluster.
	AddonObjects int
	// Written is the time from the first addon write to the last.
	Written time.Duration
	// JournalBefore and JournalAfter are the bytes of every cluster's
	// journal in dev's state folder before and after the addon set.
	JournalBefore, JournalAfter int64
	// AfterAddon is the steady RSS of each part with the addon set in
	// every cluster.
	AfterAddon map[Part]uint64
	// DevReady is the time from starting dev again (same --data-dir) until
	// it printed its kubeconfig; ServedAgain holds, for each cluster, the
	// time from that start until its workload API returned one of its
	// addon objects, sorted.
	DevReady    time.Duration
	ServedAgain []time.Duration
}

// AddonPerCluster is the steady RSS one cluster's addon set added to part.
func (s StateResult) AddonPerCluster(r Result, part Part) float64 {
	return (float64(s.AfterAddon[part]) - float64(r.After[part])) / float64(r.Clusters)
}

// ServedAgainPercentile of the clusters' times to answer after the restart.
func (s StateResult) ServedAgainPercentile(p float64) time.Duration {
	if len(s.ServedAgain) == 0 {
		return 0
	}
	return s.ServedAgain[int(float64(len(s.ServedAgain)-1)*p)]
}

// addonSet is n objects as an addon ships them: a namespace, then
// ServiceAccounts, ConfigMaps of 1 KiB, Secrets, Roles and RoleBindings in
// turn.
func addonSet(n int) []client.Object {
	out := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: addonNamespace}}}
	data := strings.Repeat("x", 1024)
	for i := 0; len(out) < n; i++ {
		meta := metav1.ObjectMeta{Namespace: addonNamespace, Name: fmt.Sprintf("addon-%03d", i/5), Labels: map[string]string{"app.kubernetes.io/part-of": "bench-addon"}}
		var obj client.Object
		switch i % 5 {
		case 0:
			obj = &corev1.ServiceAccount{ObjectMeta: meta}
		case 1:
			obj = &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config": data}}
		case 2:
			obj = &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"token": data}}
		case 3:
			obj = &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
		case 4:
			obj = &rbacv1.RoleBinding{ObjectMeta: meta,
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: meta.Name, Namespace: addonNamespace}}}
		}
		out = append(out, obj)
	}
	return out
}

// workloadClients returns an unthrottled client of every benchmark cluster's
// workload API, from the kubeconfig Secrets Cluster API wrote.
func workloadClients(ctx context.Context, c client.Client, cfg Config) ([]client.Client, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	out := make([]client.Client, cfg.Clusters)
	for i := range out {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: secret.Name(clusterName(i), secret.Kubeconfig)}, s); err != nil {
			return nil, fmt.Errorf("failed to read the kubeconfig of %s: %w", clusterName(i), err)
		}
		rc, err := clientcmd.RESTConfigFromKubeConfig(s.Data[secret.KubeconfigDataName])
		if err != nil {
			return nil, fmt.Errorf("failed to read the kubeconfig of %s: %w", clusterName(i), err)
		}
		rc.Timeout = 30 * time.Second
		if out[i], err = harness.NewClient(rc, scheme, harness.Unthrottled); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// writeAddons writes the addon set into every cluster, cfg.Concurrency
// clusters at a time.
func writeAddons(ctx context.Context, clients []client.Client, cfg Config) (time.Duration, error) {
	start := time.Now()
	err := harness.ForEach(ctx, len(clients), cfg.Concurrency, func(ctx context.Context, i int) error {
		for _, obj := range addonSet(cfg.AddonObjects) {
			if err := clients[i].Create(ctx, obj); err != nil {
				return fmt.Errorf("cluster %s: failed to create %T %s: %w", clusterName(i), obj, obj.GetName(), err)
			}
		}
		return nil
	})
	return time.Since(start), err
}

// journalBytes sums the sizes of the journal files under dir.
func journalBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(path, ".journal") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// measureState runs the persistence phase on a dev whose clusters all run:
// the addon set into every cluster, steady RSS, journal bytes, then dev
// stopped with Ctrl-C and started again on the same state folder, timing
// until every cluster serves its addon objects again. It returns the dev
// that runs at the end.
func measureState(ctx context.Context, dev *Dev, restart func(context.Context) (*Dev, error), cfg Config, r Result, stateDir string, log io.Writer) (StateResult, *Dev, error) {
	s := StateResult{AddonObjects: cfg.AddonObjects}
	restCfg, err := clientcmd.BuildConfigFromFlags("", dev.Kubeconfig)
	if err != nil {
		return s, dev, fmt.Errorf("failed to read dev's kubeconfig: %w", err)
	}
	scheme, err := NewScheme()
	if err != nil {
		return s, dev, err
	}
	c, err := harness.NewClient(restCfg, scheme, harness.Unthrottled)
	if err != nil {
		return s, dev, err
	}
	if s.JournalBefore, err = journalBytes(stateDir); err != nil {
		return s, dev, err
	}
	clients, err := workloadClients(ctx, c, cfg)
	if err != nil {
		return s, dev, err
	}
	fmt.Fprintf(log, "  writing %d objects into each of %d workload clusters\n", cfg.AddonObjects, len(clients))
	if s.Written, err = writeAddons(ctx, clients, cfg); err != nil {
		return s, dev, err
	}
	fmt.Fprintf(log, "  written in %s; steady RSS with the addon set: waiting %s, then reading for %s\n", s.Written.Round(10*time.Millisecond), cfg.Settle, cfg.Window)
	if s.AfterAddon, err = dev.SteadyRSS(ctx, cfg.Settle, cfg.Window); err != nil {
		return s, dev, err
	}
	if s.JournalAfter, err = journalBytes(stateDir); err != nil {
		return s, dev, err
	}

	fmt.Fprintln(log, "  stopping dev (Ctrl-C) and starting it again on the same --data-dir")
	if err := dev.Stop(); err != nil {
		return s, nil, fmt.Errorf("stopping dev before the restart: %w", err)
	}
	start := time.Now()
	if dev, err = restart(ctx); err != nil {
		return s, nil, err
	}
	s.DevReady = time.Since(start)
	// The restarted dev serves the clusters on their recorded endpoints
	// with the same CA, so the clients of before the restart still fit.
	probe := addonSet(2)[1]
	key := client.ObjectKeyFromObject(probe)
	waitCtx, cancel := context.WithTimeout(ctx, servedAgainTimeout)
	defer cancel()
	s.ServedAgain = make([]time.Duration, len(clients))
	err = harness.ForEach(waitCtx, len(clients), cfg.Concurrency, func(ctx context.Context, i int) error {
		for {
			obj := probe.DeepCopyObject().(client.Object)
			if err := clients[i].Get(ctx, key, obj); err == nil {
				s.ServedAgain[i] = time.Since(start)
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster %s not served again within %s: %w", clusterName(i), servedAgainTimeout, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	slices.Sort(s.ServedAgain)
	return s, dev, err
}

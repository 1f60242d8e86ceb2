package machinepool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/moby/moby/client"

	infrav1 "github.com/capi-monolith/capi-monolith/infra/api/v1alpha1"
)

// testNamespaces are the namespaces the suite's fixtures created: the only
// ones whose Docker objects the leftover check may judge (other suites, or
// other runs, share the Engine).
var testNamespaces struct {
	sync.Mutex
	names []string
}

func recordNamespace(ns string) {
	testNamespaces.Lock()
	defer testNamespaces.Unlock()
	testNamespaces.names = append(testNamespaces.names, ns)
}

// dockerLeftovers lists the containers and networks carrying our labels
// with a namespace of this suite: `make test` must leave the Engine as it
// found it. Nothing to check when no fixture was made.
func dockerLeftovers(ctx context.Context) error {
	testNamespaces.Lock()
	names := slices.Clone(testNamespaces.names)
	testNamespaces.Unlock()
	if len(names) == 0 {
		return nil
	}
	c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("failed to check Docker for leftovers: %w", err)
	}
	defer c.Close()
	var left []string
	for _, ns := range names {
		filters := client.Filters{}.Add("label", infrav1.DockerLabelClusterNamespace+"="+ns)
		containers, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
		if err != nil {
			return fmt.Errorf("failed to check Docker for leftover containers: %w", err)
		}
		for _, item := range containers.Items {
			left = append(left, "container "+strings.Join(item.Names, ","))
		}
		networks, err := c.NetworkList(ctx, client.NetworkListOptions{Filters: filters})
		if err != nil {
			return fmt.Errorf("failed to check Docker for leftover networks: %w", err)
		}
		for _, n := range networks.Items {
			left = append(left, "network "+n.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("the suite left Docker objects behind: %s", strings.Join(left, "; "))
	}
	return nil
}

package builtin_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capi-monolith/capi-monolith/modules/builtin"
)

func TestRegistryHasTheFourModulesInSetupOrder(t *testing.T) {
	g := NewWithT(t)
	g.Expect(builtin.Registry().Names()).To(Equal([]string{"infra", "machinepool", "ipam", "runtimeext"}))
}

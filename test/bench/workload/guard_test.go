package main

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
)

func TestMemoryGuardEndsTheRunBelowItsMinimum(t *testing.T) {
	g := NewWithT(t)
	// More than any machine has: the first reading trips it.
	ctx, guard := startMemoryGuard(context.Background(), 1<<62)
	defer guard.Stop()
	g.Eventually(ctx.Done()).Should(BeClosed())
	g.Expect(errors.Is(context.Cause(ctx), errLowMemory)).To(BeTrue(), "cause: %v", context.Cause(ctx))
	g.Expect(guard.Tripped()).To(BeTrue())
	lowest, err := guard.Lowest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lowest).To(BeNumerically(">", 0))
}

func TestMemoryGuardWithoutMinimumOnlyRecords(t *testing.T) {
	g := NewWithT(t)
	ctx, guard := startMemoryGuard(context.Background(), 0)
	guard.Stop()
	g.Expect(ctx.Err()).NotTo(HaveOccurred())
	g.Expect(guard.Tripped()).To(BeFalse())
	lowest, err := guard.Lowest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lowest).To(BeNumerically(">", 0))
}

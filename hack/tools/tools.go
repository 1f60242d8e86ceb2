//go:build tools

// Package tools pins the code generators the project runs (see the Makefile),
// so that their versions live in this go.mod and not on a developer's PATH.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)

package main

import "github.com/capi-monolith/capi-monolith/kustomize/bundle"

func init() {
	subcommands["bundle"] = bundle.Command
}

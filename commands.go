package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// subcommands are the jobs the binary does besides running the manager
// (which is what it does without one). Each lives in its own package; this
// table only routes to it.
var subcommands = map[string]func(ctx context.Context, args []string) error{}

// selfSignalled are the subcommands that handle SIGINT and SIGTERM
// themselves.
var selfSignalled = map[string]bool{}

// handlesSignals is true when args name a subcommand of selfSignalled.
func handlesSignals(args []string) bool {
	return len(args) > 0 && selfSignalled[args[0]]
}

// dispatch runs the subcommand named by args[0], if there is one.
func dispatch(ctx context.Context, args []string) (handled bool, err error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return false, nil
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		return true, fmt.Errorf("unknown command %q: valid commands are %s (or none, to run the manager)", args[0], strings.Join(subcommandNames(), ", "))
	}
	return true, cmd(ctx, args[1:])
}

func subcommandNames() []string {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

package bundle

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

// Command is `capi-monolith bundle`: it parses args and writes the
// repository.
func Command(_ context.Context, args []string) error {
	fs := pflag.NewFlagSet("bundle", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: capi-monolith bundle --version vX.Y.Z --out DIR [--image IMAGE]\n\n"+
			"Writes clusterctl local repositories for the infrastructure, ipam and runtime-extension\n"+
			"providers named %q, an all-in-one file and a clusterctl.yaml to DIR.\n\n", ProviderName)
		fs.PrintDefaults()
	}
	var opts Options
	var out string
	fs.StringVar(&opts.Version, "version", "", "Release version (semantic, with a leading v, e.g. v0.1.0). Required.")
	fs.StringVar(&out, "out", "", "Output folder; created when missing. Required.")
	fs.StringVar(&opts.Image, "image", "", fmt.Sprintf("Default of ${%s} in the components files (default %s:<version>).", ImageVariable, DefaultImageRepository))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if opts.Version == "" || out == "" {
		return errors.New("--version and --out are required")
	}
	return Write(out, opts)
}

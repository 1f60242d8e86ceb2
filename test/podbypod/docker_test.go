package podbypod_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
	. "github.com/onsi/gomega"
)

// LabelRun marks every container, network and image the harness creates,
// with the run's id as value: the cleanup and the leftover check find them
// by it.
const LabelRun = "podbypod.capi-monolith.dev/run"

// docker is the Engine client and the run the harness labels its objects
// with.
type docker struct {
	c   *client.Client
	run string
}

func (d *docker) labels() map[string]string { return map[string]string{LabelRun: d.run} }

func (d *docker) filters() client.Filters { return client.Filters{}.Add("label", LabelRun+"="+d.run) }

// imageFile is one file of an image built FROM scratch.
type imageFile struct {
	src, dst string
	mode     int64
}

// buildImage builds tag FROM scratch with files and entrypoint, with the
// legacy builder (nothing is pulled), labelled with the run.
func (d *docker) buildImage(ctx context.Context, tag string, entrypoint []string, files ...imageFile) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := "FROM scratch\n"
	for i, f := range files {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return fmt.Errorf("failed to read %s for image %s: %w", f.src, tag, err)
		}
		name := fmt.Sprintf("f%d", i)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: f.mode, Size: int64(len(b))}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
		df += fmt.Sprintf("COPY %s %s\n", name, f.dst)
	}
	ep, _ := json.Marshal(entrypoint)
	df += "ENTRYPOINT " + string(ep) + "\n"
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(df)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := d.c.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags: []string{tag}, Labels: d.labels(), Remove: true, ForceRemove: true, Version: build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("failed to build image %s: %w", tag, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("failed to build image %s: %w", tag, err)
	}
	if bytes.Contains(out, []byte(`"errorDetail"`)) {
		return fmt.Errorf("failed to build image %s: %s", tag, out)
	}
	return nil
}

// removeAll removes the run's containers, networks and images.
func (d *docker) removeAll(ctx context.Context) error {
	var errs []string
	cs, err := d.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: d.filters()})
	if err != nil {
		return err
	}
	for _, c := range cs.Items {
		if _, err := d.c.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	ns, err := d.c.NetworkList(ctx, client.NetworkListOptions{Filters: d.filters()})
	if err != nil {
		return err
	}
	for _, n := range ns.Items {
		if _, err := d.c.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	is, err := d.c.ImageList(ctx, client.ImageListOptions{Filters: d.filters()})
	if err != nil {
		return err
	}
	for _, i := range is.Items {
		if _, err := d.c.ImageRemove(ctx, i.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to remove the run's Docker objects: %s", strings.Join(errs, "; "))
	}
	return nil
}

// leftovers lists what of the run is still there.
func (d *docker) leftovers(ctx context.Context) ([]string, error) {
	var left []string
	cs, err := d.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: d.filters()})
	if err != nil {
		return nil, err
	}
	for _, c := range cs.Items {
		left = append(left, "container "+strings.Join(c.Names, ","))
	}
	ns, err := d.c.NetworkList(ctx, client.NetworkListOptions{Filters: d.filters()})
	if err != nil {
		return nil, err
	}
	for _, n := range ns.Items {
		left = append(left, "network "+n.Name)
	}
	is, err := d.c.ImageList(ctx, client.ImageListOptions{Filters: d.filters()})
	if err != nil {
		return nil, err
	}
	for _, i := range is.Items {
		left = append(left, "image "+strings.Join(i.RepoTags, ","))
	}
	return left, nil
}

// logs returns the last lines a container wrote, for failure messages.
func (d *docker) logs(ctx context.Context, id string) string {
	rc, err := d.c.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "25"})
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	var b strings.Builder
	_, _ = stdcopy.StdCopy(&b, &b, rc)
	return b.String()
}

// buildPause builds the pause command into dir.
func buildPause(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./internal/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "%s", b)
	return out
}

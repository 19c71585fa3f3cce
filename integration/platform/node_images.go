package platform

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// importImages builds the node tool image (the pod sandbox image and the
// tool that serves cluster DNS and canaries) and imports it into the
// node's containerd. Pods use these tags with imagePullPolicy Never: no
// registry is ever asked.
func (n *Node) importImages(ctx context.Context) error {
	if err := buildNodeToolImage(ctx, filepath.Join(n.state, "nodetool-image")); err != nil {
		return err
	}
	return n.ImportImages(ctx, PauseImage, NodeToolImage)
}

// ImportImages copies images from the Docker engine into the node's
// containerd (docker save | ctr images import).
func (n *Node) ImportImages(ctx context.Context, refs ...string) error {
	for _, ref := range refs {
		save := exec.CommandContext(ctx, "docker", "save", ref)
		imp := exec.CommandContext(ctx, "ctr", "--address", n.socket(), "-n", "k8s.io", "images", "import", "-")
		pipe, err := save.StdoutPipe()
		if err != nil {
			return err
		}
		imp.Stdin = pipe
		var saveErr, impOut strings.Builder
		save.Stderr = &saveErr
		imp.Stdout, imp.Stderr = &impOut, &impOut
		if err := save.Start(); err != nil {
			return fmt.Errorf("docker save %s: %w", ref, err)
		}
		impErr := imp.Run()
		if err := save.Wait(); err != nil {
			return fmt.Errorf("docker save %s: %v: %s", ref, err, saveErr.String())
		}
		if impErr != nil {
			return fmt.Errorf("importing %s into the node: %v: %s", ref, impErr, impOut.String())
		}
	}
	return nil
}

// buildNodeToolImage builds integration/platform/nodetool static and tags
// one FROM-scratch image with it twice.
func buildNodeToolImage(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "nodetool"), "./integration/platform/nodetool")
	build.Dir = RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building nodetool: %v: %s", err, out)
	}
	dockerfile := "FROM scratch\nCOPY nodetool /nodetool\nUSER 65534:65534\nENTRYPOINT [\"/nodetool\"]\nCMD [\"pause\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "docker", "build", "--quiet", "-t", PauseImage, "-t", NodeToolImage, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the node tool image: %v: %s", err, out)
	}
	return nil
}

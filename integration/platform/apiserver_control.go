package platform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// APIServerControl kills, restarts, pauses and resumes one Kube's
// kube-apiserver process, for fault tests. A restarted server runs the same
// command line (same port, certificates, etcd and audit log), so clients
// and tokens keep working across a restart. Close stops a server it
// started; call it before Kube.Stop. Not safe for concurrent use.
type APIServerControl struct {
	k    *Kube
	path string
	args []string
	pid  int
	// cmd is set once this control started the server itself.
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// APIServerControl finds k's running kube-apiserver (a child of this
// process serving k's port) and returns a control for it.
func (k *Kube) APIServerControl() (*APIServerControl, error) {
	u, err := url.Parse(k.config.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server address: %w", err)
	}
	pid, args, err := findAPIServer(os.Getenv(EnvKubeAPIServer), "--secure-port="+u.Port())
	if err != nil {
		return nil, err
	}
	return &APIServerControl{k: k, path: os.Getenv(EnvKubeAPIServer), args: args, pid: pid}, nil
}

// findAPIServer scans /proc for a child of this process running binary
// with arg on its command line.
func findAPIServer(binary, arg string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, fmt.Errorf("listing processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentPID(pid) != os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !isOneOf(strings.TrimSuffix(exe, " (deleted)"), []string{binary}) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		for _, a := range args[1:] {
			if a == arg {
				return pid, args[1:], nil
			}
		}
	}
	return 0, nil, errors.New("no kube-apiserver child of this process serves the control plane's port")
}

// Kill sends SIGKILL to the API server (SIGCONT first, should it be
// paused) and waits until the process is gone.
func (c *APIServerControl) Kill() error {
	if c.pid == 0 {
		return errors.New("the API server is not running")
	}
	_ = syscall.Kill(c.pid, syscall.SIGKILL)
	_ = syscall.Kill(c.pid, syscall.SIGCONT)
	if c.done != nil {
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			return errors.New("the killed API server did not exit within 30s")
		}
	} else if err := waitGone(c.pid, 30*time.Second); err != nil {
		return err
	}
	c.pid = 0
	return nil
}

// waitGone waits until pid no longer exists or is a zombie (envtest's
// goroutine reaps its own child).
func waitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return nil
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && len(b) > i+2 && b[i+2] == 'Z' {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("process %d did not exit within %s", pid, timeout)
}

// Start runs a new API server with the original command line after Kill,
// and waits until it is ready (/readyz).
func (c *APIServerControl) Start(ctx context.Context) error {
	if c.pid != 0 {
		return errors.New("the API server is still running")
	}
	if c.log == nil {
		f, err := os.OpenFile(filepath.Join(c.k.workDir, "kube-apiserver.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("opening the API server log: %w", err)
		}
		c.log = f
	}
	cmd := exec.Command(c.path, c.args...)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	c.cmd, c.pid, c.done = cmd, cmd.Process.Pid, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(c.done)
	return c.waitReady(ctx)
}

func (c *APIServerControl) waitReady(ctx context.Context) error {
	done := c.done
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, errors.New("the restarted kube-apiserver exited")
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.k.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the restarted kube-apiserver: %w", err)
	}
	return nil
}

// Pause stops the API server (SIGSTOP): connections stay open, nothing is
// answered, until Resume.
func (c *APIServerControl) Pause() error { return c.signal(syscall.SIGSTOP) }

// Resume continues a paused API server (SIGCONT).
func (c *APIServerControl) Resume() error { return c.signal(syscall.SIGCONT) }

func (c *APIServerControl) signal(sig syscall.Signal) error {
	if c.pid == 0 {
		return errors.New("the API server is not running")
	}
	if err := syscall.Kill(c.pid, sig); err != nil {
		return fmt.Errorf("signalling the API server: %w", err)
	}
	return nil
}

// Close resumes the server and stops one this control started (SIGTERM,
// then SIGKILL after 30s). The original server is left to Kube.Stop.
func (c *APIServerControl) Close() error {
	if c.pid != 0 {
		_ = syscall.Kill(c.pid, syscall.SIGCONT)
	}
	var err error
	if c.cmd != nil && c.pid != 0 {
		_ = syscall.Kill(c.pid, syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(c.pid, syscall.SIGKILL)
			<-c.done
			err = errors.New("the restarted kube-apiserver did not stop within 30s of SIGTERM; killed")
		}
		c.pid = 0
	}
	if c.log != nil {
		_ = c.log.Close()
		c.log = nil
	}
	return err
}

// EtcdURL is the address of the control plane's etcd (http, loopback), for
// tests that read its history as an independent record.
func (k *Kube) EtcdURL() string { return k.env.ControlPlane.Etcd.URL.String() }

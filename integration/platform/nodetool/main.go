// Command nodetool is the one small program the test node's images run. It
// is built static and shipped FROM scratch under two tags: the pod sandbox
// image (keyledger.local/pause) and keyledger.local/nodetool.
//
//	nodetool pause          wait for SIGTERM or SIGINT, reaping children (a pod sandbox)
//	nodetool listen ADDR    accept TCP connections on ADDR and close them (a canary)
//	nodetool dns ADDR       cluster DNS on ADDR (UDP and TCP): A records for
//	                        Services (<svc>.<ns>.svc.cluster.local), read from the
//	                        API server with the pod's ServiceAccount; every other
//	                        name is answered NXDOMAIN or REFUSED, never forwarded.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodetool pause | listen ADDR | dns ADDR")
		os.Exit(64)
	}
	var err error
	switch os.Args[1] {
	case "pause":
		pause()
	case "listen":
		err = listen(argument())
	case "dns":
		err = serveDNS(argument())
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodetool:", err)
		os.Exit(1)
	}
}

func argument() string {
	if len(os.Args) != 3 {
		fmt.Fprintf(os.Stderr, "usage: nodetool %s ADDR\n", os.Args[1])
		os.Exit(64)
	}
	return os.Args[2]
}

// pause is a pod sandbox's process: it holds the namespaces until told to
// stop and reaps any child reparented to it.
func pause() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

func listen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("listening on", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		_ = c.Close()
	}
}

// zone is the Service address table, refreshed from the API server.
type zone struct {
	mu    sync.RWMutex
	hosts map[string][4]byte // "svc.ns.svc.cluster.local." -> ClusterIP
}

func (z *zone) refresh(ctx context.Context, c kubernetes.Interface) error {
	list, err := c.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	hosts := make(map[string][4]byte, len(list.Items))
	for _, s := range list.Items {
		ip := net.ParseIP(s.Spec.ClusterIP).To4()
		if ip == nil {
			continue
		}
		hosts[fmt.Sprintf("%s.%s.svc.cluster.local.", s.Name, s.Namespace)] = [4]byte(ip)
	}
	z.mu.Lock()
	z.hosts = hosts
	z.mu.Unlock()
	return nil
}

func (z *zone) lookup(name string) ([4]byte, bool) {
	z.mu.RLock()
	defer z.mu.RUnlock()
	ip, ok := z.hosts[strings.ToLower(name)]
	return ip, ok
}

// answer builds the reply to one query: an A record for a known Service,
// NXDOMAIN for any other name under cluster.local, REFUSED for the rest
// (there is no upstream: nothing is forwarded off the node).
func (z *zone) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	name := strings.ToLower(q.Name.String())
	ip, known := z.lookup(name)
	switch {
	case known:
	case strings.HasSuffix(name, ".cluster.local.") || name == "cluster.local.":
		rh.RCode = dnsmessage.RCodeNameError
	default:
		rh.RCode = dnsmessage.RCodeRefused
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if known && q.Type == dnsmessage.TypeA {
		if err := b.StartAnswers(); err != nil {
			return nil, err
		}
		if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.AResource{A: ip}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

func serveDNS(addr string) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	z := &zone{}
	if err := z.refresh(ctx, client); err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	go func() {
		for range time.Tick(time.Second) {
			if err := z.refresh(ctx, client); err != nil {
				fmt.Fprintln(os.Stderr, "nodetool dns: refreshing Services:", err)
			}
		}
	}()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serveTCP(z, c)
		}
	}()
	fmt.Println("serving cluster DNS on", addr)
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		if reply, err := z.answer(buf[:n]); err == nil {
			_, _ = pc.WriteTo(reply, from)
		}
	}
}

func serveTCP(z *zone, c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var size [2]byte
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		reply, err := z.answer(query)
		if err != nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(reply)))
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

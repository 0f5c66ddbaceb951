package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// The bare proxy is the floor any Go proxy hop pays: httputil.ReverseProxy
// in its own process, forwarding every request to the mock untouched, with
// no validation, no logging and no telemetry. The bench starts it by
// running its own binary again with -bare-proxy.

// runBareProxy serves the bare proxy on listen until killed.
func runBareProxy(listen, upstream string) error {
	target, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	// The same idle pool contractd's upstream client keeps, so both hops
	// reuse connections alike at every concurrency.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	rp := &httputil.ReverseProxy{
		Transport: t,
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return srv.Serve(ln)
}

// bareProxy is the running bare proxy subprocess.
type bareProxy struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

// startBare runs this binary with -bare-proxy in front of upstream (the
// mock's base URL, which the request path is appended to) and waits until
// it answers. gogc is the GOGC contractd runs with, so the two processes'
// CPU differs by their code, not by a collector setting.
func startBare(upstream, gogc string) (*bareProxy, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-bare-proxy", u.Scheme+"://"+u.Host, "-listen", addr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(cleanEnv(), "GOGC="+gogc)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &bareProxy{cmd: cmd, url: "http://" + addr, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-b.exited:
			return nil, fmt.Errorf("bare proxy exited at start")
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("bare proxy not listening after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bareProxy) pid() int { return b.cmd.Process.Pid }

func (b *bareProxy) stop() {
	_ = b.cmd.Process.Kill()
	<-b.exited
}

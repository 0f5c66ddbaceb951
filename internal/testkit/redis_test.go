package testkit_test

import (
	"bufio"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
)

// ping speaks RESP's inline PING to the server at a redis:// URL.
func ping(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return &net.AddrError{Err: "answered " + line, Addr: u.Host}
	}
	return nil
}

// scripts/redis.sh through the helpers: the shared server answers on
// loopback; a test's own server starts on a chosen port, stops (the port
// is free again) and starts again on the same port.
func TestRedisHelpers(t *testing.T) {
	shared := testkit.RedisURL(t)
	if !strings.HasPrefix(shared, "redis://127.0.0.1:") && os.Getenv(testkit.RedisURLEnv) == "" {
		t.Fatalf("shared URL %q is not on loopback", shared)
	}
	if err := ping(shared); err != nil {
		t.Fatalf("shared redis: %v", err)
	}
	if testkit.RedisURL(t) != shared {
		t.Fatal("RedisURL starts a second server")
	}
	own := testkit.StartRedis(t, 0)
	if own.URL == shared || own.Port == 0 {
		t.Fatalf("own server %+v", own)
	}
	if err := ping(own.URL); err != nil {
		t.Fatal(err)
	}
	own.Stop()
	if err := ping(own.URL); err == nil {
		t.Fatal("still answering after Stop")
	}
	again := testkit.StartRedis(t, own.Port)
	if again.URL != own.URL {
		t.Fatalf("restart on port %d gave %s", own.Port, again.URL)
	}
	if err := ping(again.URL); err != nil {
		t.Fatal(err)
	}
}

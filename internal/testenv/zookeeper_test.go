package testenv

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestZooKeeperStartRestart(t *testing.T) {
	z := StartZooKeeper(t)
	put := func() {
		c, _, err := zk.Connect([]string{z.Addr()}, 2*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Create("/testenv", []byte("hello"), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create /testenv: %v", err)
		}
	}
	get := func() string {
		c, _, err := zk.Connect([]string{z.Addr()}, 2*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, _, err := c.Get("/testenv")
		if err != nil {
			t.Fatalf("get /testenv: %v", err)
		}
		return string(b)
	}
	put()
	addr := z.Addr()
	z.Stop()
	if ok, _ := z.fourLetter("ruok"); ok == "imok" {
		t.Fatal("zookeeper answers ruok after Stop")
	}
	z.Start()
	if got := get(); got != "hello" {
		t.Fatalf("after restart: /testenv = %q, want hello", got)
	}
	z.Kill9()
	z.Start()
	if z.Addr() != addr {
		t.Fatalf("address changed across restarts: %s -> %s", addr, z.Addr())
	}
	if got := get(); got != "hello" {
		t.Fatalf("after kill -9 and restart: /testenv = %q, want hello", got)
	}
}

package network

import (
	"errors"
	"testing"
	"time"
)

// TestRequestMemoryFirstHolderProceeds: when every holder of
// queued.max.request.bytes waits for more, the one that reserved first
// goes on beyond the bound instead of all waiting for their read deadline;
// the others wait until memory is given back.
func TestRequestMemoryFirstHolderProceeds(t *testing.T) {
	m := newRequestMemory(1000)
	var a, b memReservation
	if err := m.grow(&a, 600, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.grow(&b, 400, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() { bDone <- m.grow(&b, 200, time.Time{}, nil) }()
	select {
	case err := <-bDone:
		t.Fatalf("b grew beyond the bound while a held memory and was not waiting (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	// Now a waits too: a reserved first, so it proceeds.
	aDone := make(chan error, 1)
	go func() { aDone <- m.grow(&a, 300, time.Time{}, nil) }()
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("every holder waits and none proceeds: deadlock")
	}
	if got := m.inUse(); got != 1300 {
		t.Fatalf("in use %d, want 1300", got)
	}
	select {
	case <-bDone:
		t.Fatal("b proceeded too while over the bound")
	case <-time.After(100 * time.Millisecond):
	}
	a.release()
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if got := m.inUse(); got != 600 {
		t.Fatalf("in use %d after a's release, want 600", got)
	}
	b.release()
	if got := m.inUse(); got != 0 {
		t.Fatalf("in use %d after both released", got)
	}

	// A waiter gives up at its deadline and holds nothing more.
	var c, d memReservation
	m.grow(&c, 1000, time.Time{}, nil)
	if err := m.grow(&d, 10, time.Now().Add(50*time.Millisecond), nil); !errors.Is(err, errMemoryWait) {
		t.Fatalf("grow past the deadline: %v, want errMemoryWait", err)
	}
	d.release()
	c.release()
	if got := m.inUse(); got != 0 {
		t.Fatalf("in use %d after all released", got)
	}
}

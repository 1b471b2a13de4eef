package regstate

import (
	"testing"

	"github.com/rebound-go/rebound"
	"github.com/rebound-go/rebound/subscriber"
)

// TestStepsAreTheTrackersWork: a step of a Loop, posted or run in place,
// runs marked as its Tracker's work, so that InObserver is true for an
// observer the engine calls there (not through the Tracker); it is false
// on other goroutines and once the step ended. Enter marks one goroutine
// at a time and nothing without observers.
func TestStepsAreTheTrackersWork(t *testing.T) {
	obs := rebound.ObserverFunc(func(rebound.Event) {})
	tr := New("test", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, []rebound.Observer{obs}, nil)
	l := NewLoop(nil, tr)
	in := make(chan bool, 2)
	l.Do(func() bool { in <- tr.InObserver(); return true })
	if !<-in {
		t.Fatal("InObserver = false in a step run by Do")
	}
	l.Post(func() bool { in <- tr.InObserver(); return true })
	if !<-in {
		t.Fatal("InObserver = false in a posted step")
	}
	if tr.InObserver() {
		t.Fatal("InObserver = true outside the steps")
	}
	l.Stop()
	<-l.Done()

	e := tr.Enter()
	if !e || !tr.InObserver() {
		t.Fatalf("Enter = %v, InObserver = %v; want true, true", e, tr.InObserver())
	}
	other := make(chan bool)
	go func() { other <- tr.Enter() || tr.InObserver() }()
	if <-other {
		t.Fatal("another goroutine entered, or was taken for the marked one")
	}
	tr.Leave(e)
	if tr.InObserver() {
		t.Fatal("InObserver = true after Leave")
	}

	none := New("test", subscriber.Key{Service: "s"}, subscriber.Instance{IP: "10.0.0.1", Port: 1}, nil, nil)
	if none.Enter() || none.InObserver() {
		t.Fatal("a Tracker without observers marked its work")
	}
	var nilT *Tracker
	nilT.Leave(nilT.Enter())
}

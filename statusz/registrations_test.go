package statusz_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rebound-go/rebound/statusz"
	"github.com/rebound-go/rebound/subscriber"
)

// fakeReg is a subscriber.Registration with a fixed Status.
type fakeReg struct{ st subscriber.RegistrationStatus }

func (f *fakeReg) Key() subscriber.Key                               { return f.st.Key }
func (f *fakeReg) Instance() subscriber.Instance                     { return f.st.Instance }
func (f *fakeReg) Status() subscriber.RegistrationStatus             { return f.st }
func (f *fakeReg) Update(context.Context, subscriber.Instance) error { return nil }
func (f *fakeReg) Shutdown(context.Context) error                    { return nil }
func (f *fakeReg) Close() error                                      { return nil }

// TestRegistrationsSection: registrations are shown beside subscriptions,
// those not registered first, with counts for every state, the instance,
// the repairs and the (scrubbed) last error.
func TestRegistrationsSection(t *testing.T) {
	regs := []subscriber.Registration{
		&fakeReg{subscriber.RegistrationStatus{Registry: "nacos", Key: key("orders"), State: subscriber.RegistrationRegistered,
			Since: t0, Registrations: 2, Repairs: 1, Instance: subscriber.Instance{IP: "10.0.0.1", Port: 8080}}},
		nil,
		&fakeReg{subscriber.RegistrationStatus{Registry: "etcd", Key: key("billing"), State: subscriber.RegistrationRepairing,
			Since: t0, Registrations: 1, Attempts: 3, LastErr: errors.New(`dial "http://u:hunter2@h": refused`), LastErrAt: t0,
			Instance: subscriber.Instance{IP: "::1", Port: 9090}}},
	}
	h := newHandler(t, statusz.WithSubscriptions("consumers", sample()), statusz.WithRegistrations("providers", regs...))
	p := getJSON(t, h, "/?format=json")
	if len(p.Registrations) != 1 {
		t.Fatalf("registrations sections = %+v", p.Registrations)
	}
	rp := p.Registrations[0]
	if rp.Name != "providers" || rp.Counts["registered"] != 1 || rp.Counts["repairing"] != 1 || rp.Counts["stopped"] != 0 || len(rp.Counts) != 5 {
		t.Fatalf("counts = %v", rp.Counts)
	}
	if len(rp.Registrations) != 2 || rp.Registrations[0].State != "repairing" || rp.Registrations[0].Instance != "[::1]:9090" ||
		rp.Registrations[0].Attempts != 3 || rp.Registrations[1].Repairs != 1 || rp.Registrations[1].Registry != "nacos" {
		t.Fatalf("rows = %+v, want the repairing one first", rp.Registrations)
	}
	if strings.Contains(rp.Registrations[0].LastError, "hunter2") || rp.Registrations[0].LastError == "" {
		t.Fatalf("last error %q: want it shown, without the password", rp.Registrations[0].LastError)
	}
	_, body := get(t, h, "/", "text/html")
	for _, want := range []string{"Registrations: providers", "10.0.0.1:8080", "repairing", "Subscriptions: consumers"} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(body, "hunter2") {
		t.Error("HTML shows the password")
	}
	if _, err := statusz.New(statusz.WithRegistrations("", regs...)); err == nil {
		t.Error("an empty name was accepted")
	}
	// A set is given as arguments, so there is no source to be nil: an
	// empty set is a section with no rows.
	h = newHandler(t, statusz.WithRegistrations("x"))
	if p := getJSON(t, h, "/?format=json"); len(p.Registrations) != 1 || len(p.Registrations[0].Registrations) != 0 {
		t.Errorf("an empty set: %+v", p.Registrations)
	}
}

package statusz

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rebound-go/rebound/subscriber"
)

// states is every subscriber.State in the page's order, stuck first (see rank).
var states = func() []subscriber.State {
	var s []subscriber.State
	for st := subscriber.StatePending; st <= subscriber.StateStopped; st++ {
		s = append(s, st)
	}
	slices.SortStableFunc(s, func(a, b subscriber.State) int { return cmp.Compare(rank(a), rank(b)) })
	return s
}()

// rank orders states stuck first: retrying, held, pending, any state not
// named here, stopped, and subscribed last.
func rank(s subscriber.State) int {
	switch s {
	case subscriber.StateRetrying:
		return 0
	case subscriber.StateHeld:
		return 1
	case subscriber.StatePending:
		return 2
	case subscriber.StateStopped:
		return 4
	case subscriber.StateSubscribed:
		return 5
	}
	return 3
}

// stateNamed returns the State whose String is name.
func stateNamed(name string) (subscriber.State, bool) {
	for _, s := range states {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

func stateNames() []string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = s.String()
	}
	return names
}

type query struct {
	state   string // "" all, "stuck", or a state name
	q       string
	page    int // from 1
	limit   int // 0: all
	refresh int // seconds; 0: none (HTML only)

	limitSet bool // limit was given (links keep it)
}

func parseQuery(r *http.Request, jsonOut bool, pageSize int) (query, error) {
	v := r.URL.Query()
	q := query{state: v.Get("state"), q: v.Get("q"), page: 1}
	if _, ok := stateNamed(q.state); !ok && q.state != "" && q.state != "stuck" {
		return q, fmt.Errorf("state=%q: want one of %s, or stuck", q.state, strings.Join(stateNames(), ", "))
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, fmt.Errorf("page=%q: want a number from 1", p)
		}
		q.page = n
	}
	if !jsonOut {
		q.limit = pageSize
	}
	if r := v.Get("refresh"); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n < 1 || n > 3600 {
			return q, fmt.Errorf("refresh=%q: want seconds from 1 to 3600", r)
		}
		q.refresh = n
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return q, fmt.Errorf("limit=%q: want a number from 0 (all)", l)
		}
		q.limit, q.limitSet = n, true
	}
	return q, nil
}

func (q query) match(st subscriber.Status, key string) bool {
	switch q.state {
	case "":
	case "stuck":
		if st.State == subscriber.StateSubscribed {
			return false
		}
	default:
		if st.State.String() != q.state {
			return false
		}
	}
	return q.q == "" || strings.Contains(key, q.q)
}

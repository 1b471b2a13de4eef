package protocodec_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rebound-go/rebound/failback/protocodec"
)

func TestRoundTrip(t *testing.T) {
	req, _ := structpb.NewStruct(map[string]any{"order": "o-7", "items": 3.0})
	args := []any{req, nil, wrapperspb.String("fast"), durationpb.New(90 * time.Second)}
	c := protocodec.New(nil)
	data, err := c.Marshal("/shop.Orders/Notify", args)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Unmarshal("/shop.Orders/Notify", data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(args) || got[1] != nil {
		t.Fatalf("got %v", got)
	}
	for i, a := range args {
		if a == nil {
			continue
		}
		if !proto.Equal(a.(proto.Message), got[i].(proto.Message)) {
			t.Errorf("argument %d: %v, want %v", i, got[i], a)
		}
	}
	if again, _ := c.Marshal("m", args); string(again) != string(data) {
		t.Error("Marshal is not deterministic")
	}
}

func TestErrors(t *testing.T) {
	c := protocodec.New(nil)
	if _, err := c.Marshal("m", []any{"not a message"}); !errors.Is(err, protocodec.ErrNotMessage) {
		t.Errorf("Marshal(string) = %v, want ErrNotMessage", err)
	}
	data, _ := c.Marshal("m", []any{wrapperspb.Int64(7)})
	for cut := range len(data) {
		if _, err := c.Unmarshal("m", data[:cut]); err == nil {
			t.Errorf("Unmarshal of %d of %d bytes: no error", cut, len(data))
		}
	}
	empty := protocodec.New(new(protoregistry.Types))
	if _, err := empty.Unmarshal("m", data); !errors.Is(err, protoregistry.NotFound) {
		t.Errorf("unknown type: %v, want NotFound", err)
	}
}

func ExampleNew() {
	c := protocodec.New(nil)
	data, _ := c.Marshal("/greeter.Greeter/Notify", []any{wrapperspb.String("hello")})
	args, _ := c.Unmarshal("/greeter.Greeter/Notify", data) // after a restart
	fmt.Printf("%T %q\n", args[0], args[0].(*wrapperspb.StringValue).GetValue())
	// Output:
	// *wrapperspb.StringValue "hello"
}

package protocodec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/rebound-go/rebound/failback"
)

// New returns a Codec of arguments that are proto.Message values (or nil).
// Decoding finds message types in types; nil means protoregistry.GlobalTypes.
// The Codec is safe for concurrent use.
func New(types protoregistry.MessageTypeResolver) failback.Codec {
	if types == nil {
		types = protoregistry.GlobalTypes
	}
	return codec{types: types}
}

// codec stores each argument as its full message name and wire bytes.
type codec struct {
	types interface {
		FindMessageByName(protoreflect.FullName) (protoreflect.MessageType, error)
	}
}

// errNotMessage is wrapped by the error Marshal returns for an argument
// that is neither a proto.Message nor nil.
var errNotMessage = errors.New("protocodec: argument is not a proto.Message")

const (
	version = 1
	kindNil = 0
	kindMsg = 1
)

// Marshal implements failback.Codec: deterministic wire format, one
// record per argument.
func (c codec) Marshal(method string, args []any) ([]byte, error) {
	b := []byte{version}
	b = binary.AppendUvarint(b, uint64(len(args)))
	opts := proto.MarshalOptions{Deterministic: true}
	for i, a := range args {
		if a == nil {
			b = append(b, kindNil)
			continue
		}
		m, ok := a.(proto.Message)
		if !ok {
			return nil, fmt.Errorf("%w: argument %d of %q is %T", errNotMessage, i, method, a)
		}
		name := m.ProtoReflect().Descriptor().FullName()
		b = append(b, kindMsg)
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		data, err := opts.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("protocodec: argument %d of %q: %w", i, method, err)
		}
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = append(b, data...)
	}
	return b, nil
}

var errShort = errors.New("protocodec: truncated data")

// Unmarshal implements failback.Codec: every message comes back as a new
// message of its recorded type (a pointer to the generated struct).
func (c codec) Unmarshal(method string, data []byte) ([]any, error) {
	types := c.types
	if len(data) < 1 || data[0] != version {
		return nil, fmt.Errorf("protocodec: arguments of %q: unknown format", method)
	}
	rest := data[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return nil, errShort
	}
	rest = rest[k:]
	args := make([]any, n)
	for i := range args {
		if len(rest) < 1 {
			return nil, errShort
		}
		kind := rest[0]
		rest = rest[1:]
		if kind == kindNil {
			continue
		}
		if kind != kindMsg {
			return nil, fmt.Errorf("protocodec: argument %d of %q: unknown kind %d", i, method, kind)
		}
		var name, body []byte
		var ok bool
		if name, rest, ok = chunk(rest); !ok {
			return nil, errShort
		}
		if body, rest, ok = chunk(rest); !ok {
			return nil, errShort
		}
		mt, err := types.FindMessageByName(protoreflect.FullName(name))
		if err != nil {
			return nil, fmt.Errorf("protocodec: argument %d of %q: %s: %w", i, method, name, err)
		}
		m := mt.New().Interface()
		if err := proto.Unmarshal(body, m); err != nil {
			return nil, fmt.Errorf("protocodec: argument %d of %q: %w", i, method, err)
		}
		args[i] = m
	}
	return args, nil
}

func chunk(b []byte) ([]byte, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// Package protocodec is a failback.Codec for calls whose arguments are
// protocol buffers messages, such as the requests of reboundgrpc's
// Invoker (Args[0] the request, Args[1] an optional reply): each argument
// is stored as its full message name and its wire-format bytes, and
// decoded after a restart into a new message of the same type, found in a
// protoregistry (the global one by default, where every generated message
// registers itself). No per-method type table is needed.
//
//	fb, err := failback.New(dir, failback.WithStore(st, protocodec.New(nil)))
package protocodec

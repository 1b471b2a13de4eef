// Package nilness tells a nil interface value from one holding a nil
// pointer (a "typed nil"), which compares unequal to nil and panics on
// the first method call: constructors reject both with the same
// *rebound.ArgumentError.
package nilness

import "reflect"

// Is reports whether v is nil, or holds a nil pointer, map, slice, func,
// channel or interface.
func Is(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

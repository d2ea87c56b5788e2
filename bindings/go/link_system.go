//go:build !tq_intree && (tq_system || !(linux && amd64))

package tq

// With the tq_system build tag, and on every platform but linux/amd64 (the
// one whose static library the published module carries), the binding links
// the installed libtq found by pkg-config (`make install` puts tq.pc in
// $(LIBDIR)/pkgconfig).

// #cgo pkg-config: tq
import "C"

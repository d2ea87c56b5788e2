//go:build !tq_intree

package tq

// By default the binding links the installed libtq found by pkg-config
// (`make install` puts tq.pc in $(LIBDIR)/pkgconfig).

// #cgo pkg-config: tq
import "C"

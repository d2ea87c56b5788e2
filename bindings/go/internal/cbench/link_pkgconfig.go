//go:build !tq_intree

package cbench

// Links the installed libtq, as the tq package does by default.

// #cgo pkg-config: tq
import "C"

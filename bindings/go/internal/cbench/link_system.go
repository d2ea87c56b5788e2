//go:build !tq_intree && (tq_system || !(linux && amd64))

package cbench

// Links the installed libtq, as the tq package does under the same tags.

// #cgo pkg-config: tq
import "C"

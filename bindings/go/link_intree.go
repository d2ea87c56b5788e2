//go:build tq_intree

package tq

// With the tq_intree build tag the binding links the static library of the
// crate in this repository (`make lib` or `cargo build --release` builds
// target/release/libtq.a), so a fresh clone needs nothing installed.

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: ${SRCDIR}/../../target/release/libtq.a -lpthread -ldl -lm
import "C"

//go:build tq_intree

package cbench

// Links the crate's static library, as the tq package does under the same tag.

// #cgo CFLAGS: -I${SRCDIR}/../../../../include
// #cgo LDFLAGS: ${SRCDIR}/../../../../target/release/libtq.a -lpthread -ldl -lm
import "C"

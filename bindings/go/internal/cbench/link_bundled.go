//go:build !tq_intree && !tq_system && linux && amd64

package cbench

// Links the module's bundled static library, as the tq package does under
// the same tags (which also reports a missing library).

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: ${SRCDIR}/../../lib/linux_amd64/libtq.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
import "C"

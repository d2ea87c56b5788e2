//go:build !tq_intree && !tq_system && linux && amd64

package tq

// By default on linux/amd64 the binding links the static library that the
// published module carries in lib/linux_amd64 (tools/dist/go.sh puts it
// there, and copies the header that include/tq.h links to here), so that
// `go get` and `go build` need no pkg-config and no variable. The library is
// built for glibc 2.17 and needs these system libraries.
//
// In a clone of the repository lib/ is empty: the #error says so instead of
// the linker's "No such file" (the path is relative to the -I directory).

// #cgo CFLAGS: -I${SRCDIR}/include
// #cgo LDFLAGS: ${SRCDIR}/lib/linux_amd64/libtq.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
// #if !__has_include("../lib/linux_amd64/libtq.a")
// #error "lib/linux_amd64/libtq.a is missing: in the repository build with -tags tq_intree (after make lib) or -tags tq_system (pkg-config)"
// #endif
import "C"

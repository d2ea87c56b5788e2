#!/usr/bin/env bash
# The C artifacts of `make dist`, installed as their users install them, on
# a PATH without Rust: the tarball unpacked under a prefix of its own, the
# C quick start built through pkg-config (shared, with a run path; and
# static); then the Debian package through apt, the quick start built
# through the system's pkg-config and run with no run path (the package's
# ldconfig trigger makes the library found), and the package removed.
#
#   tests/dist/c.sh DISTDIR
#
# apt needs root: as another user, or when TQ_TEST_SYSTEM_INSTALL is not 1
# (installing a package is a change to the machine, which CI allows), the
# package's contents are checked and the system install is skipped with the
# reason.
set -euo pipefail

dist=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tests/dist/no-rust.sh
. "$here/no-rust.sh"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

expect_quickstart() {
    local output
    output=$("$@" "$work/queue.db")
    rm -f "$work"/queue.db*
    [ "$output" = 'task 1: {"file": "a.mp4"}' ] || { echo "tests/dist/c.sh: the quick start printed: $output" >&2; exit 1; }
}

tarball=$dist/c/tq-$version-linux-x86_64.tar.gz
echo "tests/dist/c.sh: $(basename "$tarball"): $(stat -c %s "$tarball") bytes"
mkdir "$work/opt"
tar -C "$work/opt" -xzf "$tarball"
prefix=$work/opt/tq-$version-linux-x86_64
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -Wall -Wextra -Werror -std=c11 -o "$work/quickstart" "$repo/examples/c/quickstart.c" \
    $(pkg-config --cflags --libs tq) -Wl,-rpath,"$(pkg-config --variable=libdir tq)"
expect_quickstart "$work/quickstart"
cc -Wall -Wextra -Werror -std=c11 -o "$work/quickstart-static" "$repo/examples/c/quickstart.c" \
    $(pkg-config --static --cflags --libs tq | sed 's/-ltq/-Wl,-Bstatic -ltq -Wl,-Bdynamic/')
! objdump -p "$work/quickstart-static" | grep -q 'NEEDED.*libtq'
expect_quickstart "$work/quickstart-static"
"$prefix/bin/tq" --version | grep -qx "tq $version (library $version)"
unset PKG_CONFIG_PATH
echo "tests/dist/c.sh: the tarball under $prefix: the quick start built with pkg-config ran, shared and static"

deb=$dist/deb/tq_${version}_amd64.deb
echo "tests/dist/c.sh: $(basename "$deb"): $(stat -c %s "$deb") bytes"
contents=$(dpkg-deb --contents "$deb" | awk '{ print $6 }')
for file in ./usr/bin/tq ./usr/include/tq.h ./usr/lib/x86_64-linux-gnu/libtq.so.$version \
    ./usr/lib/x86_64-linux-gnu/libtq.a ./usr/lib/x86_64-linux-gnu/pkgconfig/tq.pc ./usr/share/doc/tq/copyright; do
    grep -qx -- "$file" <<<"$contents" || { echo "tests/dist/c.sh: $deb lacks $file" >&2; exit 1; }
done
if [ "$(id -u)" != 0 ] || [ "${TQ_TEST_SYSTEM_INSTALL:-}" != 1 ]; then
    echo "tests/dist/c.sh: skipped installing $(basename "$deb") with apt: it changes the machine, so it runs as root with TQ_TEST_SYSTEM_INSTALL=1 (as CI does)"
    exit 0
fi
if dpkg -s tq > /dev/null 2>&1; then
    echo "tests/dist/c.sh: a package named tq is installed already; not replacing it" >&2
    exit 1
fi
trap 'dpkg -r tq > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
start=$(date +%s.%N)
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" > "$work/apt.log" 2>&1 ||
    { cat "$work/apt.log" >&2; exit 1; }
echo "tests/dist/c.sh: apt installed it in $(awk -v s="$start" -v e="$(date +%s.%N)" "BEGIN { printf \"%.1f\", e - s }") s"
cc -Wall -Wextra -Werror -std=c11 -o "$work/quickstart-system" "$repo/examples/c/quickstart.c" $(pkg-config --cflags --libs tq)
expect_quickstart env -u LD_LIBRARY_PATH "$work/quickstart-system"
/usr/bin/tq --version | grep -qx "tq $version (library $version)"
dpkg -r tq > /dev/null
[ ! -e /usr/lib/x86_64-linux-gnu/libtq.so.$version ]
echo "tests/dist/c.sh: the Debian package: installed, the quick start built with pkg-config ran, removed"

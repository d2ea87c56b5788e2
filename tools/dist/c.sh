#!/usr/bin/env bash
# The C artifacts of `make dist`: a tarball to unpack under any prefix, and
# a Debian package that apt installs.
#
#   tools/dist/c.sh STAGE OUTDIR
#
# STAGE is what tools/dist/build.sh staged (lib/, bin/tq, native-static-libs);
# writes OUTDIR/c/tq-VERSION-linux-x86_64.tar.gz and
# OUTDIR/deb/tq_VERSION_amd64.deb. Runs from the repository's root.
set -euo pipefail

stage=$1
out=$2
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
soname=$(objdump -p "$stage/lib/libtq.so.$version" | awk '$1 == "SONAME" { print $2 }')
[ -n "$soname" ] || { echo "tools/dist/c.sh: $stage/lib/libtq.so.$version has no SONAME" >&2; exit 1; }
libs_private=$(cat "$stage/native-static-libs")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Lays out an installation under $1 with the given directories; tq.pc's
# prefix is $2 (literal text, so the tarball's can be relative to the file).
install_tree() {
    local root=$1 prefix=$2 libdir=$3
    install -d "$root/bin" "$root/$libdir/pkgconfig" "$root/include" "$root/share/doc/tq"
    install -m 755 "$stage/bin/tq" "$root/bin/tq"
    install -m 644 "$stage/lib/libtq.so.$version" "$root/$libdir/libtq.so.$version"
    [ "$soname" = "libtq.so.$version" ] || ln -s "libtq.so.$version" "$root/$libdir/$soname"
    ln -s "libtq.so.$version" "$root/$libdir/libtq.so"
    install -m 644 "$stage/lib/libtq.a" "$root/$libdir/libtq.a"
    install -m 644 include/tq.h "$root/include/tq.h"
    sed -e "s|@PREFIX@|$prefix|; s|@LIBDIR@|\${prefix}/$libdir|; s|@INCLUDEDIR@|\${prefix}/include|" \
        -e "s|@VERSION@|$version|; s|@LIBS_PRIVATE@|$libs_private|" tq.pc.in > "$root/$libdir/pkgconfig/tq.pc"
    install -m 644 LICENSE README.md CHANGELOG.md "$root/share/doc/tq/"
    "$stage/bin/tq" --help > "$root/share/doc/tq/tq-help.txt"
}

# The tarball: one folder, tq.pc relative to where it is unpacked
# (pkg-config's ${pcfiledir}), so that any prefix works without editing.
name=tq-$version-linux-x86_64
install_tree "$work/$name" '${pcfiledir}/../..' lib
mkdir -p "$out/c"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -C "$work" -czf "$out/c/$name.tar.gz" "$name"
echo "tools/dist/c.sh: $out/c/$name.tar.gz"

# The Debian package: under /usr, the library in the multiarch folder, with
# ldconfig run by dpkg's trigger (as debhelper's packages do).
deb=$work/deb
install_tree "$deb/usr" /usr lib/x86_64-linux-gnu
mv "$deb/usr/share/doc/tq/LICENSE" "$deb/usr/share/doc/tq/copyright"
install -d "$deb/DEBIAN"
installed_kb=$(du -sk "$deb/usr" | cut -f1)
cat > "$deb/DEBIAN/control" <<EOF
Package: tq
Version: $version
Architecture: amd64
Maintainer: The tq authors <tq@localhost>
Installed-Size: $installed_kb
Depends: libc6 (>= 2.17), libgcc-s1
Section: libs
Priority: optional
Description: persistent task queue in one SQLite file, with a C ABI
 libtq (shared and static, with tq.h and tq.pc) and the tq command, which
 inspects, repairs and works a queue.
EOF
echo "activate-noawait ldconfig" > "$deb/DEBIAN/triggers"
mkdir -p "$out/deb"
dpkg-deb --root-owner-group --build "$deb" "$out/deb/tq_${version}_amd64.deb" > /dev/null
echo "tools/dist/c.sh: $out/deb/tq_${version}_amd64.deb"

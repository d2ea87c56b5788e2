#!/usr/bin/env bash
# Builds, once, the libtq and the tq command that every package of
# `make dist` carries: x86-64 Linux, for glibc 2.17 and later (the baseline
# of manylinux2014, so that one build serves pip, npm, Go and C users on
# systems up to ten years old), with the dist profile (release, optimised
# across crates).
#
#   tools/dist/build.sh STAGE     (after `make lib`)
#
# cargo-zigbuild links through zig's C toolchain against glibc 2.17's symbol
# versions; both are installed, pinned, under build/dist-tools. Stages
# lib/libtq.so.VERSION, lib/libtq.a (without debug sections and the LLVM
# bitcode rustc embeds for LTO), bin/tq and
# native-static-libs (the system libraries a static link needs) in STAGE,
# then checks that no symbol needs a glibc newer than 2.17.
set -euo pipefail

stage=$1
ZIGBUILD_VERSION=0.24.1
ZIGLANG_VERSION=0.15.1
TARGET=x86_64-unknown-linux-gnu
GLIBC=2.17
tools=$PWD/build/dist-tools
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

if ! "$tools/bin/cargo-zigbuild" --version 2>/dev/null | grep -qx "cargo-zigbuild $ZIGBUILD_VERSION"; then
    echo "tools/dist/build.sh: installing cargo-zigbuild $ZIGBUILD_VERSION into $tools"
    cargo install --quiet --locked --root "$tools" --version "$ZIGBUILD_VERSION" cargo-zigbuild
fi
if ! "$tools/venv/bin/python" -m ziglang version 2>/dev/null | grep -qx "$ZIGLANG_VERSION"; then
    echo "tools/dist/build.sh: installing zig $ZIGLANG_VERSION (the ziglang package) into $tools/venv"
    python3 -m venv "$tools/venv"
    "$tools/venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIGLANG_VERSION"
fi
# cargo-zigbuild runs `python3 -m ziglang` when no zig is on the PATH.
export PATH=$tools/venv/bin:$tools/bin:$PATH

echo "tools/dist/build.sh: building libtq and tq for $TARGET, glibc $GLIBC"
# One command for both, so that they share one build of the tq crate.
cargo zigbuild --locked --profile dist --target "$TARGET.$GLIBC" -p tq -p tq-cli
built=target/$TARGET/dist

rm -rf "$stage"
mkdir -p "$stage/lib" "$stage/bin"
cp "$built/libtq.so" "$stage/lib/libtq.so.$version"
strip --strip-debug --remove-section=.llvmbc --remove-section=.llvmcmd -o "$stage/lib/libtq.a" "$built/libtq.a"
cp "$built/tq" "$stage/bin/tq"
# The system libraries a static link needs, as rustc named them for `make
# lib`'s build of the same target.
cp build/native-static-libs "$stage/native-static-libs"

# The newest glibc symbol version each binary needs.
for binary in "$stage/lib/libtq.so.$version" "$stage/bin/tq"; do
    newest=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    if [ "$(printf '%s\n%s\n' "$newest" "$GLIBC" | sort -V | tail -n 1)" != "$GLIBC" ]; then
        echo "tools/dist/build.sh: $binary needs glibc $newest, newer than $GLIBC" >&2
        exit 1
    fi
    echo "tools/dist/build.sh: $binary: $(stat -c %s "$binary") bytes, needs glibc $newest"
done

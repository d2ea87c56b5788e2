#!/usr/bin/env bash
# Installs what `make test` and `make example` need besides the Rust, Go and
# Node.js toolchains, and checks that those are there. `make setup` runs it
# (before `make test` and `make example`), and so does .ci/run. It installs
# only what is missing, so with everything present it installs nothing and
# reads no package index.
set -euo pipefail

CARGO=${CARGO:-cargo}
GO=${GO:-go}
NODE=${NODE:-node}
NPM=${NPM:-npm}
PYTHON=${PYTHON:-python3}

# Debian packages: C toolchain, nm/objdump, valgrind, pkg-config; strace
# and the system SQLite for the fault tests; libfaketime for the torture
# tests' clock jumps; the PostgreSQL server for the PostgreSQL backend's
# tests (`make test-postgres` starts a throwaway one of its own); headless
# Chromium and chromedriver for the dashboard's browser tests
# (cli/tests/browser.rs). The AddressSanitizer runtime comes with gcc's own
# libraries.
packages=(build-essential binutils valgrind pkg-config strace libsqlite3-dev faketime postgresql chromium chromium-driver)
# The Python packaging test makes a virtual environment, which Debian's own
# Python can do only with python3-venv.
if ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
    packages+=(python3-venv)
fi

# Runs a command as root: directly when root, else through sudo when it
# works without asking for a password; fails when neither can.
as_root() {
    if [[ $(id -u) -eq 0 ]]; then
        "$@"
    else
        sudo -n "$@"
    fi
}

if ! command -v dpkg >/dev/null; then
    echo "setup: not a Debian system (no dpkg): make sure the equivalents of these Debian packages are installed: ${packages[*]}" >&2
else
    missing=()
    for package in "${packages[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if ((${#missing[@]})); then
        if [[ $(id -u) -ne 0 ]] && ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
            echo "setup: missing Debian packages: ${missing[*]}" >&2
            if command -v sudo >/dev/null; then
                echo "setup: install them with: sudo apt-get update && sudo apt-get install ${missing[*]}" >&2
            else
                echo "setup: install them as root with: apt-get update && apt-get install ${missing[*]}" >&2
            fi
            exit 1
        fi
        echo "setup: installing Debian packages: ${missing[*]}"
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
fi

# The toolchains come from their own installers, which cannot be run from
# here: say plainly which is missing.
need() {
    local command=$1 advice=$2
    if ! command -v "$command" >/dev/null; then
        echo "setup: $command not found: $advice" >&2
        exit 1
    fi
}
need "$CARGO" "install Rust 1.89 or later with rustup"
need "$GO" "install Go 1.25 or later from go.dev"
need "$NODE" "install Node.js 20 or later"
need "$NPM" "install Node.js 20 or later, with npm"
need "$PYTHON" "install Python 3.9 or later"

# pytest, for the Python binding's tests.
if ! pytest_version=$("$PYTHON" -m pytest --version 2>&1); then
    echo "setup: installing pytest"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check pytest || {
        echo "setup: pip could not install pytest: install it with $PYTHON -m pip install pytest, or Debian's python3-pytest" >&2
        exit 1
    }
    pytest_version=$("$PYTHON" -m pytest --version 2>&1)
fi

# apsw, a SQLite for Python newer than the stdlib's, for the tests of tq's
# SQLite extension (make test-ext).
apsw_version=3.54.1.0
if ! "$PYTHON" -c "import apsw, sys; sys.exit(apsw.apsw_version() != '$apsw_version')" 2>/dev/null; then
    echo "setup: installing apsw $apsw_version"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "apsw==$apsw_version" || {
        echo "setup: pip could not install apsw: install it with $PYTHON -m pip install apsw==$apsw_version" >&2
        exit 1
    }
fi

# The npm packages of bindings/node, examples/node, bench/node and
# tests/ext/node are installed by the make targets that use them (npm ci,
# from each folder's package-lock.json).
echo "setup: all present: $("$CARGO" --version), $("$GO" version | cut -d' ' -f3), node $("$NODE" --version)," \
    "npm $("$NPM" --version), $pytest_version"

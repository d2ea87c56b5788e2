# Sourced by the tests of tests/dist: takes every folder holding cargo or
# rustc off the PATH, as on a user's machine without Rust, and checks it.
path=
IFS=: read -r -a folders <<<"$PATH"
for folder in "${folders[@]}"; do
    [ -n "$folder" ] && [ ! -e "$folder/cargo" ] && [ ! -e "$folder/rustc" ] && path=${path:+$path:}$folder
done
export PATH=$path
unset path folders folder
if command -v cargo > /dev/null || command -v rustc > /dev/null; then
    echo "tests/dist: cargo or rustc is still on the PATH ($PATH)" >&2
    exit 1
fi

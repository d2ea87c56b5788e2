//! include/tq.h must be exactly what the pinned cbindgen generates from the
//! sources. `TQ_BLESS=1 cargo test --test header` rewrites it.

use std::path::Path;

fn generate() -> String {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let mut config = cbindgen::Config::from_file(Path::new(crate_dir).join("cbindgen.toml"))
        .expect("cbindgen.toml parses");
    let (major, minor, patch) = (
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
    );
    let number = major.parse::<u32>().unwrap() * 10_000
        + minor.parse::<u32>().unwrap() * 100
        + patch.parse::<u32>().unwrap();
    // The version macros come from Cargo.toml, never typed by hand.
    config.after_includes = Some(format!(
        "\n#define TQ_VERSION \"{}\"\n#define TQ_VERSION_MAJOR {major}\n\
         #define TQ_VERSION_MINOR {minor}\n#define TQ_VERSION_PATCH {patch}\n\
         #define TQ_VERSION_NUMBER {number}",
        env!("CARGO_PKG_VERSION"),
    ));
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn checked_in_header_matches_the_sources() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/tq.h");
    let fresh = generate();
    if std::env::var_os("TQ_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("include/tq.h is writable");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "include/tq.h is stale: regenerate it with `TQ_BLESS=1 cargo test --test header` and commit it"
    );
}

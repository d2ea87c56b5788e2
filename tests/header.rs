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

/// The names a C file sees: every macro, typedef, struct, enum and
/// enumerator the header declares.
fn declared_names(header: &str) -> Vec<String> {
    let word = |text: &str| -> String {
        text.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    let mut in_enum = false;
    let mut in_comment = false;
    for line in header.lines().map(str::trim) {
        if in_comment || line.starts_with("/*") {
            in_comment = !line.contains("*/");
            continue;
        }
        let declaration = line.strip_prefix("typedef ").unwrap_or(line);
        if let Some(rest) = line.strip_prefix("#define ") {
            names.push(word(rest));
        } else if let Some(rest) = line.strip_prefix("} ") {
            // The closing `} tq_x;` of a typedef'd body.
            if let Some(name) = rest.strip_suffix(';') {
                names.push(word(name));
            }
            in_enum = false;
        } else if let Some((kind, rest)) = declaration
            .split_once(' ')
            .filter(|(kind, _)| *kind == "enum" || *kind == "struct")
        {
            // `enum tq_status tq_open(...);` declares a function, whose
            // name the exported-symbols test checks.
            if !line.contains('(') {
                names.push(word(rest));
                if let Some(alias) = rest.strip_suffix(';').and_then(|r| r.rsplit(' ').next()) {
                    names.push(word(alias));
                }
            }
            in_enum = kind == "enum" && line.ends_with('{');
        } else if let Some(rest) = line.strip_prefix("typedef ") {
            if let Some(alias) = rest.strip_suffix(';').and_then(|r| r.rsplit(' ').next()) {
                names.push(word(alias));
            }
        } else if in_enum && !line.is_empty() {
            names.push(word(line));
        }
    }
    names.retain(|name| !name.is_empty());
    names
}

#[test]
fn every_macro_and_type_is_prefixed() {
    let header = generate();
    let names = declared_names(&header);
    for expected in [
        "TQ_MAX_RATE_CLAIMS",
        "tq_status",
        "TQ_ERR_IO",
        "tq_queue",
        "TQ_VERSION",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} not found in {names:?}"
        );
    }
    let unprefixed: Vec<&String> = names
        .iter()
        .filter(|name| !name.starts_with("tq_") && !name.starts_with("TQ_"))
        .collect();
    assert!(
        unprefixed.is_empty(),
        "tq.h declares names without tq_ or TQ_: {unprefixed:?}"
    );
}

//! Exports the extension's entry point alone (see tq_sqlite.map).

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let script =
            std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
                .join("tq_sqlite.map");
        println!("cargo:rerun-if-changed=tq_sqlite.map");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            script.display()
        );
    }
}

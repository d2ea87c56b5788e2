//! Gives libtq.so its SONAME, which carries the ABI version: the major
//! version, or "0.MINOR" before 1.0 (where a minor release may break the
//! ABI), as cargo-c does; and its version script, which exports the
//! `tq_*` functions alone.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("set by cargo");
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("set by cargo");
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtq.so.{abi}");
        let script =
            std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
                .join("tq.map");
        println!("cargo:rerun-if-changed=tq.map");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            script.display()
        );
    }
}

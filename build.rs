//! Reads the exact Wasmtime and Wizer versions from `Cargo.lock`, so the template and
//! compiled-module cache keys name the versions really linked (one fact, one place: the pin in
//! `Cargo.toml`, resolved in the lock file).

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").expect("Cargo.lock is committed");
    for (package, var) in [
        ("wasmtime", "VIVARIUM_WASMTIME_VERSION"),
        ("wasmtime-wizer", "VIVARIUM_WIZER_VERSION"),
    ] {
        let needle = format!("name = \"{package}\"\nversion = \"");
        let start = lock
            .find(&needle)
            .unwrap_or_else(|| panic!("{package} is not in Cargo.lock"))
            + needle.len();
        let version = &lock[start..start + lock[start..].find('"').expect("a quoted version")];
        println!("cargo:rustc-env={var}={version}");
        if package == "wasmtime" {
            let major = version
                .split('.')
                .next()
                .expect("a version has a major part");
            println!("cargo:rustc-env=VIVARIUM_WASMTIME_MAJOR={major}");
        }
    }
}

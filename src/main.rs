//! The `vivarium` binary: see [`vivarium::cli`].

fn main() -> std::process::ExitCode {
    vivarium::cli::main()
}

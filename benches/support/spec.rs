//! What the benches ask a sandbox for: the default limits, no packages, files or input.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use vivarium::testing::{GuestSetup, HostShare, SandboxSpec};
use vivarium::{Limits, Vivarium};

/// A sandbox of `host` with the default limits, rich outputs on or off (on: what
/// `open_interpreter` asks for, without its checkpoint).
pub fn spec(host: &Vivarium, rich: bool) -> SandboxSpec {
    SandboxSpec {
        host: HostShare::unlimited(),
        packages: host.no_packages(),
        limits: Limits::DEFAULT,
        env: vec![],
        files: vec![],
        stdin: vec![],
        observer: None,
        cancel: Arc::new(AtomicBool::new(false)),
        setup: GuestSetup {
            rich,
            ..GuestSetup::default()
        },
        seed: None,
        volumes: vec![],
        layer: None,
    }
}

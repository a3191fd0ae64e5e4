//! The system tier: several real binaries at once and the services they need (HAProxy, an
//! S3-compatible server, Chromium, a fresh runtime install, load and crash runs). Not part of
//! plain `cargo test` (its target has `test = false` in Cargo.toml); `.ci/run` runs it with
//! `cargo test --test system`, after installing what it needs.

#[path = "../http_support/mod.rs"]
mod http_support;

mod cli_fresh_install;
mod cluster_haproxy;
mod console_browser;
mod http_crash;
mod http_density;
mod http_load;
mod http_package_plotly;
mod http_snapshots_s3;
mod jupyterlab_browser;

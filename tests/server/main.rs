//! The server tier: real servers on 127.0.0.1 (in this process, with real worker processes,
//! or the real binary), driven over HTTP, SSE and WebSocket by real clients. One binary, so
//! the crate is linked once; `cargo test --test server` runs the tier, `cargo test --test
//! server http_sessions::` one module.

#[path = "../http_support/mod.rs"]
mod http_support;

mod client_python;
mod code_mode;
mod console;
mod default_template;
mod egress;
mod egress_leaks;
mod flag_defaults;
mod front_check;
mod front_e2b;
mod front_e2b_edges;
mod front_e2b_shell;
mod front_mcp;
mod front_mcp_shell;
mod front_piston;
mod front_stream;
mod guest_links;
mod http_durable;
mod http_execute;
mod http_held_files;
mod http_hibernate;
mod http_leakage;
mod http_leakage_paths;
mod http_package_index_hostile;
mod http_package_install;
mod http_package_queue;
mod http_packages;
mod http_production;
mod http_rollback;
mod http_session_carry;
mod http_session_owners;
mod http_sessions;
mod http_snapshots;
mod http_tenants;
mod http_turns;
mod http_workers;
mod jupyter_bounded;
mod jupyter_clients;
mod jupyter_gateway;
mod jupyter_magics;
mod mcp_flood;
mod notebook_cells;
mod session_metrics;
mod shell_differential;
mod shell_hostile;
mod shell_http;
mod templates;
mod traces;
mod volume_mounts;
mod volumes;
mod webhooks;
mod wire_golden;

//! Settings of `vivarium serve`: every flag can also be given as a `VIVARIUM_*` environment
//! variable (the flag wins). [`ServeArgs::resolve`] checks them and fills in what depends on
//! the machine (cores, memory).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

use crate::engine::MAX_LIVE_INSTANCES;
use crate::leakage::{LeakPolicy, Scanner};
use crate::limits::{Limits, MIN_MEMORY_BYTES};
use crate::packages::{PackageOptions, PackageSource, normalize};
use crate::runtime::RuntimeOptions;
use crate::snapshot::is_node_id;

use crate::supervisor::tenants::{Quota, Quotas};
use crate::supervisor::{LeakageConfig, Settings};

use super::mcp_sessions::McpSessionLimits;
use super::telemetry::OtlpProtocol;

/// Format of the server's tracing logs on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, coloured when stderr is a terminal.
    Text,
    /// One JSON object a line.
    Json,
}

/// Whether requests may add packages (`--packages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PackagesMode {
    /// Pure-Python wheels from the package index.
    On,
    /// Only the built-in set.
    Off,
}

/// `vivarium serve` flags.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on. Port 0 picks a free port; the bound address is printed on stdout.
    #[arg(long, env = "VIVARIUM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Executions (and session turns) running at once [default: number of cores].
    #[arg(long, env = "VIVARIUM_MAX_CONCURRENCY")]
    pub max_concurrency: Option<usize>,
    /// Requests that may wait for a free execution slot; past that, 429.
    #[arg(long, env = "VIVARIUM_QUEUE_DEPTH", default_value_t = 64)]
    pub queue_depth: usize,
    /// How long a request waits in the queue before it gets 429.
    #[arg(long, env = "VIVARIUM_QUEUE_TIMEOUT_MS", default_value_t = 30_000)]
    pub queue_timeout_ms: u64,
    /// Memory every running sandbox and resident session may hold together: linear memory,
    /// tmpfs files and a reserve each [default: 3/4 of RAM]. A run that would not fit waits
    /// in the queue or gets 429 (a session first makes room by hibernating the coldest idle
    /// one); growth past it fails in the guest (MemoryError, ENOSPC, status
    /// host_memory_exceeded); memory_bytes above it is refused with 400.
    #[arg(long, env = "VIVARIUM_MEMORY_BUDGET_BYTES")]
    pub memory_budget_bytes: Option<u64>,
    /// Resident sessions (interpreter in memory) at most; past that, opening or waking one
    /// hibernates the coldest idle one, or gets 429 when none is idle.
    #[arg(long, env = "VIVARIUM_MAX_SESSIONS", default_value_t = 64)]
    pub max_sessions: usize,
    /// Hibernated sessions (in the snapshot store) at most; past that, no more hibernate.
    #[arg(long, env = "VIVARIUM_MAX_HIBERNATED_SESSIONS", default_value_t = 10_000)]
    pub max_hibernated_sessions: usize,
    /// The states after a session's last N turns it keeps to roll back or fork to (the
    /// state it is in counted; 1 keeps none before it; at most 64); a session may ask for
    /// fewer or more up to 64 (`keep_turns`).
    #[arg(long, env = "VIVARIUM_KEEP_TURNS", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub keep_turns: u32,
    /// What a session's kept turns may hold in host memory together, in bytes (the pages
    /// and files each turn replaced); the oldest go first past it.
    #[arg(long, env = "VIVARIUM_KEPT_TURN_BYTES", default_value_t = 64 << 20)]
    pub kept_turn_bytes: u64,
    /// A session nobody used for this long is closed (then 410).
    #[arg(long, env = "VIVARIUM_SESSION_IDLE_SECS", default_value_t = 600)]
    pub session_idle_secs: u64,
    /// A session is closed this long after it opened, used or not.
    #[arg(long, env = "VIVARIUM_SESSION_LIFETIME_SECS", default_value_t = 3600)]
    pub session_lifetime_secs: u64,
    /// MCP sessions (one per `initialize` on `/mcp`) kept at most, every caller together;
    /// past that, `initialize` gets 429 `too_many_mcp_sessions`.
    #[arg(long, env = "VIVARIUM_MAX_MCP_SESSIONS", default_value_t = 2048)]
    pub max_mcp_sessions: usize,
    /// MCP sessions one tenant keeps at most; past that, its `initialize` gets 429
    /// `quota_exceeded` (quota `mcp_sessions`; no session is ended to make room) [default:
    /// 256 with API keys; without keys, --max-mcp-sessions unless given].
    #[arg(long, env = "VIVARIUM_MAX_MCP_SESSIONS_PER_TENANT")]
    pub max_mcp_sessions_per_tenant: Option<u64>,
    /// An MCP session with no request for this long is ended (its client initializes again).
    #[arg(long, env = "VIVARIUM_MCP_SESSION_IDLE_SECS", default_value_t = 60)]
    pub mcp_session_idle_secs: u64,
    /// Largest request body; past that, 413.
    #[arg(long, env = "VIVARIUM_MAX_BODY_BYTES", default_value_t = 32 << 20)]
    pub max_body_bytes: usize,
    /// File of API keys, one a line, `ID:KEY` or just `KEY` (`#` starts a comment). When
    /// set, every /v1 call needs `Authorization: Bearer KEY`.
    #[arg(long, env = "VIVARIUM_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,
    /// Append the audit log (JSON lines) to this file [default: stderr].
    #[arg(long, env = "VIVARIUM_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// On SIGTERM/SIGINT, how long running executions may go on before they are cancelled.
    #[arg(long, env = "VIVARIUM_SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    pub shutdown_grace_ms: u64,
    /// Where sandboxes' temp dirs go (a folder per server process under it)
    /// (default: /dev/shm/vivarium-scratch when /dev/shm is a writable tmpfs, else $TMPDIR/vivarium-scratch).
    #[arg(long, env = "VIVARIUM_SCRATCH")]
    pub scratch_dir: Option<PathBuf>,
    /// What happens to output holding a secret or personal data, when a request does not
    /// say: `off`, `report` (listed in `leaks`), `redact` (also replaced by
    /// `[REDACTED:rule]`) or `deny` (withheld: 422 `output_leak`).
    #[arg(long, env = "VIVARIUM_LEAKAGE", value_enum, default_value_t = LeakPolicy::Redact)]
    pub leakage: LeakPolicy,
    /// The weakest leakage policy a request may ask for; a weaker one is a 400.
    #[arg(long, env = "VIVARIUM_LEAKAGE_FLOOR", value_enum, default_value_t = LeakPolicy::Off)]
    pub leakage_floor: LeakPolicy,
    /// Extra leakage rules in gitleaks' format (`[[rules]]`), plus `literals = [...]`
    /// (strings always redacted) and `disabled_rules = [...]` (rule ids to leave out).
    #[arg(long, env = "VIVARIUM_LEAKAGE_RULES")]
    pub leakage_rules: Option<PathBuf>,
    /// Where session snapshots are kept (a directory, created if missing)
    /// (default: `$VIVARIUM_HOME/snapshots`).
    #[arg(long, env = "VIVARIUM_SNAPSHOT_DIR")]
    pub snapshot_dir: Option<PathBuf>,
    /// Keep session snapshots in S3-compatible object storage instead of `--snapshot-dir`:
    /// `s3://bucket/prefix`. Credentials, region and endpoint come from the usual AWS
    /// variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL`).
    #[arg(long, env = "VIVARIUM_SNAPSHOT_URL")]
    pub snapshot_url: Option<String>,
    /// Snapshots older than this are deleted (sessions' own ones too, once their session is
    /// gone).
    #[arg(long, env = "VIVARIUM_SNAPSHOT_RETENTION_SECS", default_value_t = 7 * 24 * 3600)]
    pub snapshot_retention_secs: u64,
    /// Code mode: executions (running with tools, or suspended at a round of tool calls,
    /// resident or kept as a journal) the server counts at most. Each resident one waiting for
    /// answers holds a thread of the supervisor's blocking pool (512), so the default stays
    /// well under it.
    #[arg(long, env = "VIVARIUM_MAX_SUSPENDED_EXECUTIONS", default_value_t = 256)]
    pub max_suspended_executions: usize,
    /// Code mode: such executions one tenant holds at most; past that, 429 `quota_exceeded`
    /// (quota `suspended_executions`) [default: 64 with API keys; without keys, the server's
    /// cap unless given].
    #[arg(long, env = "VIVARIUM_MAX_SUSPENDED_EXECUTIONS_PER_TENANT")]
    pub max_suspended_executions_per_tenant: Option<u64>,
    /// Code mode: how long a suspended execution stays resident (its program waiting in its
    /// worker) before only its journal in the snapshot store is kept; a later resume replays
    /// it from there.
    #[arg(long, env = "VIVARIUM_SUSPENDED_RESIDENT_SECS", default_value_t = 30)]
    pub suspended_resident_secs: u64,
    /// Code mode: how long an unanswered suspended execution is kept after its last
    /// suspension, then forgotten (its journal deleted).
    #[arg(long, env = "VIVARIUM_SUSPENDED_TTL_SECS", default_value_t = 3600)]
    pub suspended_ttl_secs: u64,
    /// Network by exception: the hosts guests' HTTP requests may reach, comma-separated
    /// `host[:port]` rules (`api.example.com`, `*.example.com:443`, `203.0.113.7`, `*`).
    /// Empty, the default: no run has network. A request's `network.allow` can only narrow
    /// it. docs/guides/network.md.
    #[arg(long, env = "VIVARIUM_EGRESS_ALLOW", default_value = "")]
    pub egress_allow: String,
    /// Address ranges (CIDRs or addresses, comma-separated) that egress may connect to
    /// besides public ones; private, loopback, link-local and metadata addresses are
    /// refused unless listed here.
    #[arg(long, env = "VIVARIUM_EGRESS_ALLOW_PRIVATE", default_value = "")]
    pub egress_allow_private: String,
    /// Address ranges (CIDRs or addresses, comma-separated) a webhook may be sent to besides
    /// public ones; a webhook on a private, loopback, link-local or metadata address is
    /// refused at registration and at every delivery unless listed here.
    #[arg(long, env = "VIVARIUM_WEBHOOK_ALLOW_PRIVATE", default_value = "")]
    pub webhook_allow_private: String,
    /// PEM file of more CA certificates egress trusts, beside the machine's (certificates
    /// are always verified).
    #[arg(long, env = "VIVARIUM_EGRESS_CA_BUNDLE")]
    pub egress_ca_bundle: Option<PathBuf>,
    /// Requests one run may make.
    #[arg(long, env = "VIVARIUM_EGRESS_MAX_REQUESTS", default_value_t = 256)]
    pub egress_max_requests: u32,
    /// Bytes of one response body a run may read.
    #[arg(long, env = "VIVARIUM_EGRESS_RESPONSE_BYTES", default_value_t = 16 << 20)]
    pub egress_response_bytes: u64,
    /// Milliseconds one outbound request may take.
    #[arg(long, env = "VIVARIUM_EGRESS_REQUEST_TIMEOUT_MS", default_value_t = 10_000)]
    pub egress_request_timeout_ms: u64,
    /// Milliseconds all of one run's requests may take together.
    #[arg(long, env = "VIVARIUM_EGRESS_TOTAL_MS", default_value_t = 60_000)]
    pub egress_total_ms: u64,
    /// TOML file of secrets the operator defines, which a request names
    /// (`"secrets": {"NAME": {"operator": "github"}}`) instead of sending the value: each a
    /// table with `value` or `value_env`, `hosts`, and optionally the `keys` that may use it.
    #[arg(long, env = "VIVARIUM_EGRESS_SECRETS_FILE")]
    pub egress_secrets_file: Option<PathBuf>,
    /// Tests only: answers for names instead of the system's resolver
    /// (`name=addr[+addr][/next answer],...`); every answer still passes the address rules.
    #[arg(long, hide = true)]
    pub egress_test_resolve: Option<String>,
    /// Bytes each tenant (or, without keys, everyone together) may keep in the snapshot
    /// store: its snapshots, its hibernated sessions and its durable sessions' own snapshots
    /// together. A snapshot past it is refused with 409 `snapshot_quota_exceeded`; a session
    /// past it does not hibernate.
    #[arg(long, env = "VIVARIUM_SNAPSHOT_QUOTA_BYTES", default_value_t = 10 << 30)]
    pub snapshot_quota_bytes: u64,
    /// Where volumes are kept (a directory, created if missing)
    /// (default: `$VIVARIUM_HOME/volumes`).
    #[arg(long, env = "VIVARIUM_VOLUME_DIR")]
    pub volume_dir: Option<PathBuf>,
    /// Volumes one tenant may have; past it, 429 `quota_exceeded`.
    #[arg(long, env = "VIVARIUM_VOLUMES_PER_TENANT", default_value_t = 16)]
    pub volumes_per_tenant: u64,
    /// Bytes one volume may hold; a write past it is 507 `volume_full`, the volume unchanged.
    #[arg(long, env = "VIVARIUM_VOLUME_BYTES", default_value_t = 1 << 30)]
    pub volume_bytes: u64,
    /// Bytes all of one tenant's volumes may hold together.
    #[arg(long, env = "VIVARIUM_VOLUME_TENANT_BYTES", default_value_t = 4 << 30)]
    pub volume_tenant_bytes: u64,
    /// Files and folders one volume may hold.
    #[arg(long, env = "VIVARIUM_VOLUME_FILES", default_value_t = 10_000)]
    pub volume_files: u64,
    /// Where user templates are kept (a directory, created if missing; workers read it)
    /// (default: `$VIVARIUM_HOME/user-templates`).
    #[arg(long, env = "VIVARIUM_TEMPLATE_DIR")]
    pub template_dir: Option<PathBuf>,
    /// User templates one tenant may have (built, building or failed); past it, 429
    /// `quota_exceeded`.
    #[arg(long, env = "VIVARIUM_TEMPLATES_PER_TENANT", default_value_t = 32)]
    pub templates_per_tenant: u64,
    /// Bytes of template images one tenant may keep; a build past it fails at its end.
    #[arg(long, env = "VIVARIUM_TEMPLATE_TENANT_BYTES", default_value_t = 2 << 30)]
    pub template_tenant_bytes: u64,
    /// Template builds one tenant may have in flight; past it, 429 `quota_exceeded`.
    #[arg(long, env = "VIVARIUM_TEMPLATE_BUILDS_PER_TENANT", default_value_t = 2)]
    pub template_builds_per_tenant: u64,
    /// Runs (executions, turns, checks, session starts) one tenant may have in flight and
    /// waiting together; past it, 429 `quota_exceeded` [default: --max-concurrency plus half
    /// of --queue-depth].
    #[arg(long, env = "VIVARIUM_MAX_RUNS_PER_TENANT")]
    pub max_runs_per_tenant: Option<u64>,
    /// Resident sessions one tenant may hold; past it, its own coldest idle session
    /// hibernates, or 429 `quota_exceeded` [default: half of --max-sessions].
    #[arg(long, env = "VIVARIUM_MAX_SESSIONS_PER_TENANT")]
    pub max_sessions_per_tenant: Option<u64>,
    /// Hibernated sessions one tenant may have; past it, its sessions stay resident
    /// [default: a quarter of --max-hibernated-sessions].
    #[arg(long, env = "VIVARIUM_MAX_HIBERNATED_SESSIONS_PER_TENANT")]
    pub max_hibernated_sessions_per_tenant: Option<u64>,
    /// Jupyter kernel WebSockets one tenant may hold open at once; past it, the upgrade gets
    /// 429 `quota_exceeded` (quota `kernel_sockets`) [default: 16 with API keys; without
    /// keys, no limit unless given].
    #[arg(long, env = "VIVARIUM_MAX_KERNEL_SOCKETS_PER_TENANT")]
    pub max_kernel_sockets_per_tenant: Option<u64>,
    /// Package resolutions and `.pyc` compiles one tenant may have in flight; more wait in
    /// order (at most `--queue-timeout-ms`), up to 8 times as many; past that, 429
    /// `quota_exceeded`.
    #[arg(long, env = "VIVARIUM_MAX_PACKAGE_JOBS_PER_TENANT", default_value_t = 2)]
    pub max_package_jobs_per_tenant: u64,
    /// Bytes of Jupyter shell requests (about their code) one tenant's kernel WebSockets may
    /// hold waiting, all together; past it a request is answered with an error, not queued.
    /// Without API keys, at least 256 MiB.
    #[arg(long, env = "VIVARIUM_KERNEL_QUEUE_BYTES_PER_TENANT", default_value_t = 64 << 20)]
    pub kernel_queue_bytes_per_tenant: u64,
    /// The share of the memory budget, in percent, that one tenant's running sandboxes and
    /// resident sessions may be admitted for; past it, its own idle sessions hibernate, or
    /// 429 `quota_exceeded`.
    #[arg(long, env = "VIVARIUM_MEMORY_PERCENT_PER_TENANT", default_value_t = 50)]
    pub memory_percent_per_tenant: u64,
    /// A session idle this long is written to the snapshot store and its instance freed; its
    /// next request brings it back (0: never).
    #[arg(long, env = "VIVARIUM_HIBERNATE_AFTER_SECS", default_value_t = 60)]
    pub hibernate_after_secs: u64,
    /// Whether requests may add pure-Python packages (`packages`): `on`, or `off` (only the
    /// built-in set; a request naming any gets 403 `packages_disabled`).
    #[arg(long, env = "VIVARIUM_PACKAGES", value_enum, default_value_t = PackagesMode::On)]
    pub packages: PackagesMode,
    /// The package index (a PEP 503 simple index URL) packages come from; left out, the one
    /// pip is configured with on this host.
    #[arg(long, env = "VIVARIUM_PACKAGE_INDEX")]
    pub package_index: Option<String>,
    /// A file of distribution names, one a line (`#` comments): only these may be added,
    /// dependencies included.
    #[arg(long, env = "VIVARIUM_PACKAGE_ALLOWLIST")]
    pub package_allowlist: Option<PathBuf>,
    /// The most packages one request may name.
    #[arg(long, env = "VIVARIUM_MAX_PACKAGES", default_value_t = 20)]
    pub max_packages: usize,
    /// The largest wheel downloaded, in bytes.
    #[arg(long, env = "VIVARIUM_MAX_WHEEL_BYTES", default_value_t = 64 << 20)]
    pub max_wheel_bytes: u64,
    /// The largest set of packages unpacked, in bytes.
    #[arg(long, env = "VIVARIUM_MAX_PACKAGE_ENV_BYTES", default_value_t = 256 << 20)]
    pub max_package_env_bytes: u64,
    /// Where package environments are cached [default: `<VIVARIUM_HOME>/packages`].
    #[arg(long, env = "VIVARIUM_PACKAGE_CACHE_DIR")]
    pub package_cache_dir: Option<PathBuf>,
    /// The package cache's size: least recently used sets are removed past it.
    #[arg(long, env = "VIVARIUM_PACKAGE_CACHE_BYTES", default_value_t = 2 << 30)]
    pub package_cache_bytes: u64,
    /// How long resolving (and, separately, downloading) a set of packages may take.
    #[arg(long, env = "VIVARIUM_PACKAGE_TIMEOUT_SECS", default_value_t = 60)]
    pub package_timeout_secs: u64,
    /// Key ids (the keys file's names, comma-separated) that may read the operator console
    /// (`/console`, `GET /v1/console/state` and `/stream`). Without API keys anyone may.
    #[arg(long, env = "VIVARIUM_CONSOLE_KEYS", default_value = "", value_delimiter = ',')]
    pub console_keys: Vec<String>,
    /// OpenTelemetry: the OTLP collector's base URL (`http://collector:4318` for
    /// HTTP/protobuf, whose traces go to `{URL}/v1/traces`; `http://collector:4317` for gRPC).
    /// Unset: no traces, nothing exported.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otel_endpoint: Option<String>,
    /// How traces are sent to `--otel-endpoint`: OTLP over HTTP/protobuf or over gRPC.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_PROTOCOL", value_enum, default_value_t = OtlpProtocol::HttpProtobuf)]
    pub otel_protocol: OtlpProtocol,
    /// OpenTelemetry's `service.name` of the server's spans.
    #[arg(long, env = "OTEL_SERVICE_NAME", default_value = "vivarium")]
    pub otel_service_name: String,
    /// The share of traces kept (0 to 1) when the caller's `traceparent` does not decide.
    #[arg(long, env = "VIVARIUM_OTEL_SAMPLE_RATIO", default_value_t = 1.0)]
    pub otel_sample_ratio: f64,
    /// Log format of the ordinary (tracing) logs on stderr.
    #[arg(long, env = "VIVARIUM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Adds `POST /v1/debug/panic`, a handler that panics (for tests of panic handling).
    #[arg(long, hide = true)]
    pub debug_panic_route: bool,
    /// Worker processes that run guest code, each jailed [default: number of cores]; 0 runs
    /// it in the server's own process (no second wall).
    #[arg(long, env = "VIVARIUM_WORKERS")]
    pub workers: Option<usize>,
    /// The jail around each worker: `on` (seccomp, Landlock, a network namespace,
    /// no_new_privs, rlimits; each layer the kernel lacks is reported) or `off` (debugging).
    #[arg(long, env = "VIVARIUM_WORKER_JAIL", value_enum, default_value_t = Switch::On)]
    pub worker_jail: Switch,
    /// A worker's heap limit (RLIMIT_DATA), in bytes: past it the worker dies and is
    /// replaced [default: the memory budget plus 4 GiB for the engine's own].
    #[arg(long, env = "VIVARIUM_WORKER_HEAP_BYTES")]
    pub worker_heap_bytes: Option<u64>,
    /// The binary workers run (`<it> worker`) [default: this one].
    #[arg(long, env = "VIVARIUM_WORKER_EXE", hide = true)]
    pub worker_exe: Option<PathBuf>,
    /// Run as one node of several behind a proxy, sharing the snapshot store
    /// (`--snapshot-url`, or one `--snapshot-dir` on a shared file system): a session's lease
    /// in the store names the node that holds it, and another node takes it over when that
    /// node drains or dies (see `docs/operations/cluster.md`).
    #[arg(long, env = "VIVARIUM_CLUSTER")]
    pub cluster: bool,
    /// This node's id: in the `Vivarium-Node` response header, and in the leases of its
    /// sessions [default: the host name]. 1 to 63 of A-Z a-z 0-9 . _ -, unique per node.
    #[arg(long, env = "VIVARIUM_NODE_ID")]
    pub node_id: Option<String>,
    /// With `--cluster`: a node whose heartbeat in the store is older than this is dead and
    /// its durable sessions are taken over (it beats every quarter of it).
    #[arg(long, env = "VIVARIUM_NODE_TTL_MS", default_value_t = 5_000)]
    pub node_ttl_ms: u64,
    /// On SIGTERM, how long `/readyz` answers 503 while every request is still served, so
    /// that a proxy's health checks move new work away before the node stops taking it.
    #[arg(long, env = "VIVARIUM_DRAIN_DELAY_MS", default_value_t = 0)]
    pub drain_delay_ms: u64,
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

impl ServeArgs {
    /// What the `--otel-*` flags say.
    pub fn telemetry(&self) -> super::telemetry::TelemetrySettings {
        super::telemetry::TelemetrySettings {
            endpoint: self.otel_endpoint.clone(),
            protocol: self.otel_protocol,
            service_name: self.otel_service_name.clone(),
            sample_ratio: self.otel_sample_ratio,
        }
    }

    /// The settings with defaults for the listen address and everything else; for tests and
    /// embedders that do not parse a command line.
    pub fn defaults() -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: ServeArgs,
        }
        // `VIVARIUM_*` variables in the environment still apply, as for the command line.
        let mut w = Wrapper::parse_from(["vivarium"]);
        w.args.listen = "127.0.0.1:0".parse().expect("static address");
        w.args
    }
}

/// Checked settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Executions and session turns running at once (at least 1).
    pub max_concurrency: usize,
    /// Worker processes (0: runs in this process).
    pub workers: usize,
    /// Whether each worker is jailed.
    pub worker_jail: bool,
    /// A worker's heap limit.
    pub worker_heap_bytes: u64,
    /// The binary workers run.
    pub worker_exe: Option<PathBuf>,
    /// Requests that may wait for a free execution slot; past that, 429.
    pub queue_depth: usize,
    /// How long a request waits in the queue before it gets 429.
    pub queue_timeout: Duration,
    /// What every running sandbox and resident session may hold together, in bytes.
    pub memory_budget_bytes: u64,
    /// Resident sessions at most.
    pub max_sessions: usize,
    /// Hibernated sessions at most.
    pub max_hibernated_sessions: usize,
    /// A session unused for this long is closed.
    pub session_idle: Duration,
    /// A session is closed this long after it opened, used or not.
    pub session_lifetime: Duration,
    /// What a session keeps of its last turns, unless it asks for fewer or more.
    pub turn_history: crate::vocabulary::TurnHistory,
    /// MCP sessions: the server's cap, each caller's, and their idle expiry.
    pub mcp_sessions: McpSessionLimits,
    /// Largest request body, in bytes; past that, 413.
    pub max_body_bytes: usize,
    /// File of API keys; `None` leaves /v1 open to anyone.
    pub api_keys_file: Option<PathBuf>,
    /// File the audit log is appended to; `None` writes it to stderr.
    pub audit_log: Option<PathBuf>,
    /// On SIGTERM/SIGINT, how long running executions may go on before they are cancelled.
    pub shutdown_grace: Duration,
    /// Base of the sandboxes' scratch dirs; `None` is `default_scratch_base()`.
    pub scratch_dir: Option<PathBuf>,
    /// Where session snapshots are kept, unless `snapshot_url` is set.
    pub snapshot_dir: PathBuf,
    /// S3-compatible object storage for snapshots (`s3://bucket/prefix`).
    pub snapshot_url: Option<String>,
    /// How long a snapshot is kept.
    pub snapshot_retention: Duration,
    /// Code mode's executions: how many, how long resident, how long kept.
    pub executions: crate::supervisor::executions::ExecutionSettings,
    /// Network by exception: the performer, when `--egress-allow` allows any host.
    pub egress: Option<std::sync::Arc<crate::supervisor::egress::Egress>>,
    /// Where webhooks may be sent (`--webhook-allow-private`).
    pub webhooks: crate::supervisor::events::WebhookSettings,
    /// Bytes of snapshots one key may keep.
    pub snapshot_quota_bytes: u64,
    /// Where volumes are kept.
    pub volume_dir: PathBuf,
    /// What each tenant may keep in volumes.
    pub volume_limits: crate::volumes::VolumeLimits,
    /// Where user templates are kept, and what each tenant may hold of them.
    pub templates: crate::supervisor::templates::TemplateSettings,
    /// Each tenant's limits when the server has API keys (a tenant the keys file declares
    /// may set its own).
    pub tenant_quotas: Quotas,
    /// The one tenant's limits when it has none: the server-wide caps, unless a
    /// per-tenant flag was given.
    pub single_tenant_quotas: Quotas,
    /// Idle sessions hibernate after this long; `None`: never.
    pub hibernate_after: Option<Duration>,
    /// Format of the tracing logs on stderr.
    pub log_format: LogFormat,
    /// Key ids that may read the operator console (`--console-keys`).
    pub console_keys: Vec<String>,
    /// Whether `POST /v1/debug/panic` is routed (tests of panic handling only).
    pub debug_panic_route: bool,
    /// What a request may ask for: the core's maxima, memory lowered to the budget.
    pub maximum: Limits,
    /// The output-leakage rules and policies.
    pub leakage: LeakageConfig,
    /// Where extra packages come from, their cache and bounds.
    pub packages: PackageOptions,
    /// This node's id (the host name unless given).
    pub node_id: String,
    /// With `--cluster`: how long a silent node is still alive.
    pub cluster_ttl: Option<Duration>,
    /// How long `/readyz` says 503 on SIGTERM before the node stops taking work.
    pub drain_delay: Duration,
}

impl ServeArgs {
    /// Checks the settings and fills in the machine's defaults (concurrency: the cores;
    /// memory budget: 3/4 of `MemTotal`). Fails, naming the flag, on a value that cannot work.
    pub fn resolve(&self) -> anyhow::Result<Config> {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let max_concurrency = self.max_concurrency.unwrap_or(cores);
        if max_concurrency == 0 {
            bail!("--max-concurrency must be at least 1");
        }
        // Twice the slots: as many again run for tenants that had nothing running (fair.rs).
        if 2 * max_concurrency + self.max_sessions > MAX_LIVE_INSTANCES {
            bail!(
                "2 x --max-concurrency + --max-sessions = {} is above the engine's {MAX_LIVE_INSTANCES} instance slots",
                2 * max_concurrency + self.max_sessions
            );
        }
        let memory_budget_bytes = match self.memory_budget_bytes {
            Some(b) => b,
            None => total_memory_bytes()
                .map(|m| m / 4 * 3)
                .context("reading /proc/meminfo; set --memory-budget-bytes")?,
        };
        if memory_budget_bytes < MIN_MEMORY_BYTES {
            bail!("--memory-budget-bytes must be at least {MIN_MEMORY_BYTES}");
        }
        let mut maximum = Limits::MAXIMUM;
        maximum.memory_bytes = maximum.memory_bytes.min(memory_budget_bytes);
        if self.session_idle_secs == 0 || self.session_lifetime_secs == 0 {
            bail!("session idle time and lifetime must be at least 1 s");
        }
        if self.max_mcp_sessions == 0
            || self.max_mcp_sessions_per_tenant == Some(0)
            || self.mcp_session_idle_secs == 0
        {
            bail!(
                "--max-mcp-sessions, --max-mcp-sessions-per-tenant and --mcp-session-idle-secs \
                 must be at least 1"
            );
        }
        if self.leakage < self.leakage_floor {
            bail!(
                "--leakage {} is weaker than --leakage-floor {}",
                self.leakage.as_str(),
                self.leakage_floor.as_str()
            );
        }
        let extra = match &self.leakage_rules {
            Some(path) => Some((
                path.display().to_string(),
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading --leakage-rules {}", path.display()))?,
            )),
            None => None,
        };
        let scanner = Scanner::new(extra.as_ref().map(|(n, t)| (n.as_str(), t.as_str())))
            .context("loading the leakage rules")?;
        let runtime = RuntimeOptions::from_env();
        let mut packages = PackageOptions::new(&runtime.home);
        packages.python = runtime.python.clone();
        packages.source = match (self.packages, &self.package_index) {
            (PackagesMode::Off, _) => PackageSource::Off,
            (PackagesMode::On, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    bail!("--package-index must be an http:// or https:// URL");
                }
                PackageSource::Index(url.clone())
            }
            (PackagesMode::On, None) => PackageSource::PipDefault,
        };
        if let Some(path) = &self.package_allowlist {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading --package-allowlist {}", path.display()))?;
            packages.allowlist = Some(
                text.lines()
                    .map(|l| l.split('#').next().unwrap_or("").trim())
                    .filter(|l| !l.is_empty())
                    .map(normalize)
                    .collect(),
            );
        }
        if self.package_timeout_secs == 0 {
            bail!("--package-timeout-secs must be at least 1");
        }
        packages.max_requested = self.max_packages;
        packages.max_wheel_bytes = self.max_wheel_bytes;
        packages.max_env_bytes = self.max_package_env_bytes;
        packages.cache_bytes = self.package_cache_bytes;
        if let Some(dir) = &self.package_cache_dir {
            packages.dir = dir.clone();
        }
        packages.timeout = Duration::from_secs(self.package_timeout_secs);
        let node_id = match &self.node_id {
            Some(id) if is_node_id(id) => id.clone(),
            Some(id) => bail!(
                "--node-id {id:?}: 1 to 63 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
            ),
            None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| is_node_id(h))
                .unwrap_or_else(|| "vivarium".to_string()),
        };
        if self.cluster && !(1_000..=600_000).contains(&self.node_ttl_ms) {
            bail!("--node-ttl-ms must be between 1000 and 600000");
        }
        let (tenant_quotas, single_tenant_quotas) =
            self.tenant_quotas(max_concurrency, memory_budget_bytes)?;
        Ok(Config {
            listen: self.listen,
            max_concurrency,
            workers: self.workers.unwrap_or(cores),
            worker_jail: self.worker_jail == Switch::On,
            worker_heap_bytes: self
                .worker_heap_bytes
                .unwrap_or(memory_budget_bytes.saturating_add(4 << 30)),
            worker_exe: self.worker_exe.clone(),
            queue_depth: self.queue_depth,
            queue_timeout: Duration::from_millis(self.queue_timeout_ms),
            memory_budget_bytes,
            max_sessions: self.max_sessions,
            max_hibernated_sessions: self.max_hibernated_sessions,
            session_idle: Duration::from_secs(self.session_idle_secs),
            session_lifetime: Duration::from_secs(self.session_lifetime_secs),
            turn_history: crate::vocabulary::TurnHistory {
                turns: self.keep_turns,
                bytes: self.kept_turn_bytes,
            },
            mcp_sessions: McpSessionLimits {
                max_total: self.max_mcp_sessions,
                idle: Duration::from_secs(self.mcp_session_idle_secs),
            },
            max_body_bytes: self.max_body_bytes,
            api_keys_file: self.api_keys_file.clone(),
            audit_log: self.audit_log.clone(),
            shutdown_grace: Duration::from_millis(self.shutdown_grace_ms),
            scratch_dir: self.scratch_dir.clone(),
            snapshot_dir: self
                .snapshot_dir
                .clone()
                .unwrap_or_else(|| RuntimeOptions::from_env().home.join("snapshots")),
            snapshot_url: self.snapshot_url.clone(),
            snapshot_retention: Duration::from_secs(self.snapshot_retention_secs),
            executions: crate::supervisor::executions::ExecutionSettings {
                max: self.max_suspended_executions.max(1),
                resident_for: Duration::from_secs(self.suspended_resident_secs),
                ttl: Duration::from_secs(self.suspended_ttl_secs.max(1)),
            },
            egress: self.egress()?,
            webhooks: crate::supervisor::events::WebhookSettings {
                addresses: crate::egress::AddressRules::parse_csv(&self.webhook_allow_private)
                    .map_err(|e| anyhow::anyhow!("--webhook-allow-private: {e}"))?,
            },
            snapshot_quota_bytes: self.snapshot_quota_bytes,
            volume_dir: self
                .volume_dir
                .clone()
                .unwrap_or_else(|| RuntimeOptions::from_env().home.join("volumes")),
            volume_limits: crate::volumes::VolumeLimits {
                volumes: self.volumes_per_tenant,
                volume_bytes: self.volume_bytes,
                tenant_bytes: self.volume_tenant_bytes,
                files: self.volume_files,
            },
            templates: crate::supervisor::templates::TemplateSettings {
                dir: self
                    .template_dir
                    .clone()
                    .unwrap_or_else(|| RuntimeOptions::from_env().home.join("user-templates")),
                limits: crate::supervisor::templates::TemplateLimits {
                    templates: self.templates_per_tenant.max(1),
                    bytes: self.template_tenant_bytes,
                    builds: self.template_builds_per_tenant.max(1),
                },
                shared: None,
            },
            tenant_quotas,
            single_tenant_quotas,
            hibernate_after: (self.hibernate_after_secs > 0)
                .then(|| Duration::from_secs(self.hibernate_after_secs)),
            log_format: self.log_format,
            debug_panic_route: self.debug_panic_route,
            console_keys: self
                .console_keys
                .iter()
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect(),
            maximum,
            leakage: LeakageConfig {
                scanner: std::sync::Arc::new(scanner),
                default: self.leakage,
                floor: self.leakage_floor,
            },
            packages,
            node_id,
            cluster_ttl: self
                .cluster
                .then(|| Duration::from_millis(self.node_ttl_ms)),
            drain_delay: Duration::from_millis(self.drain_delay_ms),
        })
    }
}

impl Config {
    /// Sandboxes and sessions live at once at most: the resident sessions, and twice the
    /// slots (as many again run for tenants that had nothing running: `supervisor::fair`).
    pub fn max_live(&self) -> usize {
        self.max_sessions + 2 * self.max_concurrency
    }
}

impl ServeArgs {
    /// The egress performer of `--egress-*` (`None` when no host is allowed).
    fn egress(&self) -> anyhow::Result<Option<std::sync::Arc<crate::supervisor::egress::Egress>>> {
        use crate::egress::{AddressRules, AllowList, EgressLimits};
        use crate::supervisor::egress::{Egress, EgressSettings, OperatorSecrets, TestAnswers};
        let allow = AllowList::parse_csv(&self.egress_allow).context("--egress-allow")?;
        if allow.is_empty() {
            return Ok(None);
        }
        let addresses = AddressRules::parse_csv(&self.egress_allow_private)
            .map_err(|e| anyhow::anyhow!("--egress-allow-private: {e}"))?;
        if self.egress_max_requests == 0
            || self.egress_request_timeout_ms == 0
            || self.egress_total_ms == 0
        {
            bail!(
                "--egress-max-requests, --egress-request-timeout-ms and --egress-total-ms must be at least 1"
            );
        }
        let test_resolve = match &self.egress_test_resolve {
            Some(t) => Some(
                TestAnswers::parse(t).map_err(|e| anyhow::anyhow!("--egress-test-resolve: {e}"))?,
            ),
            None => None,
        };
        let settings = EgressSettings {
            allow,
            addresses,
            limits: EgressLimits {
                requests: self.egress_max_requests,
                response_bytes: self.egress_response_bytes,
                request_timeout_ms: self.egress_request_timeout_ms,
                total_ms: self.egress_total_ms,
                ..EgressLimits::default()
            },
            ca_bundle: self.egress_ca_bundle.clone(),
            test_resolve,
            operator_secrets: match &self.egress_secrets_file {
                Some(path) => OperatorSecrets::load(path).context("--egress-secrets-file")?,
                None => OperatorSecrets::default(),
            },
        };
        Ok(Some(std::sync::Arc::new(Egress::new(settings)?)))
    }

    /// The per-tenant limits: with API keys (each flag, or its default share of the
    /// server-wide cap), and for the one tenant there is without keys (only the flags given).
    fn tenant_quotas(
        &self,
        max_concurrency: usize,
        memory_budget_bytes: u64,
    ) -> anyhow::Result<(Quotas, Quotas)> {
        if self.memory_percent_per_tenant == 0 || self.memory_percent_per_tenant > 100 {
            bail!("--memory-percent-per-tenant must be between 1 and 100");
        }
        let mut shared = Quotas::unlimited();
        let mut single = Quotas::unlimited();
        let runs = (max_concurrency + self.queue_depth / 2) as u64;
        let each = [
            (Quota::Runs, self.max_runs_per_tenant, runs),
            (
                Quota::ResidentSessions,
                self.max_sessions_per_tenant,
                (self.max_sessions as u64 / 2).max(1),
            ),
            (
                Quota::HibernatedSessions,
                self.max_hibernated_sessions_per_tenant,
                (self.max_hibernated_sessions as u64 / 4).max(1),
            ),
            // Each socket holds at most channels.rs's bound in host memory: this caps a
            // tenant's.
            (Quota::KernelSockets, self.max_kernel_sockets_per_tenant, 16),
            // Each MCP session holds a fixed few tens of KiB (api/mcp/transport.rs bounds its buffers).
            (Quota::McpSessions, self.max_mcp_sessions_per_tenant, 256),
            // Each holds a run's place while resident, and a journal in the store.
            (
                Quota::SuspendedExecutions,
                self.max_suspended_executions_per_tenant,
                64,
            ),
        ];
        for (q, flag, default) in each {
            if flag == Some(0) {
                bail!(
                    "--max-{}-per-tenant must be at least 1",
                    q.as_str().replace('_', "-")
                );
            }
            shared.set(q, flag.unwrap_or(default));
            if let Some(n) = flag {
                single.set(q, n);
            }
        }
        // What all of a tenant's sockets may hold waiting, together (each socket holds at
        // most channels.rs's own bound besides): past it a request is answered, not queued.
        shared.set(Quota::KernelQueueBytes, self.kernel_queue_bytes_per_tenant);
        single.set(
            Quota::KernelQueueBytes,
            self.kernel_queue_bytes_per_tenant.max(256 << 20),
        );
        shared.set(Quota::SnapshotBytes, self.snapshot_quota_bytes);
        single.set(Quota::SnapshotBytes, self.snapshot_quota_bytes);
        shared.set(Quota::PackageJobs, self.max_package_jobs_per_tenant.max(1));
        shared.set(
            Quota::MemoryBytes,
            memory_budget_bytes / 100 * self.memory_percent_per_tenant,
        );
        Ok((shared, single))
    }
}

fn total_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl Config {
    /// What the control plane is built with.
    pub fn supervisor(&self) -> Settings {
        Settings {
            shared_budget: self.workers > 0,
            memory_budget_bytes: self.memory_budget_bytes,
            max_concurrency: self.max_concurrency,
            queue_depth: self.queue_depth,
            queue_timeout: self.queue_timeout,
            max_sessions: self.max_sessions,
            max_hibernated_sessions: self.max_hibernated_sessions,
            session_idle: self.session_idle,
            session_lifetime: self.session_lifetime,
            turn_history: self.turn_history,
            maximum: self.maximum,
            leakage: self.leakage.clone(),
            node_id: self.node_id.clone(),
            cluster_ttl: self.cluster_ttl,
            snapshot_retention: self.snapshot_retention,
            executions: self.executions,
            egress: self.egress.clone(),
            webhooks: self.webhooks.clone(),
            templates: Some(self.templates.clone()),
        }
    }
}

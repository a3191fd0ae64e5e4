//! The checks every ask's parts go through, whichever entry takes them: files (paths,
//! base64, count, size), code mode's tools, and the network grant with its secrets. Each
//! fault names its field.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::ask::{FileIn, NetworkRequest, SecretRequest, VolumeMountRequest};
use crate::guest::Language;
use crate::sandbox::workdir::{MAX_INPUT_FILES, validate_relative_path};
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::{Runner, SupervisorError, SupervisorResult};
use crate::vivarium::InputFile;
use crate::volumes::{VolumeError, VolumeMount, VolumeName};

/// Decodes and checks caller files: valid paths, base64, count and total size.
pub fn decode_files(files: Vec<FileIn>, disk_bytes: u64) -> SupervisorResult<Vec<InputFile>> {
    if files.len() > MAX_INPUT_FILES {
        return Err(SupervisorError::InvalidRequest(format!(
            "{} files given; at most {MAX_INPUT_FILES}",
            files.len()
        )));
    }
    let mut out = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for (i, f) in files.into_iter().enumerate() {
        validate_relative_path(&f.path).map_err(|e| SupervisorError::InvalidPath {
            field: format!("files[{i}].path"),
            message: e.to_string(),
        })?;
        let content =
            STANDARD
                .decode(f.content.as_bytes())
                .map_err(|e| SupervisorError::InvalidBase64 {
                    field: format!("files[{i}].content"),
                    message: format!("files[{i}].content is not valid base64: {e}"),
                })?;
        total += content.len() as u64;
        if total > disk_bytes {
            return Err(past_disk_limit(disk_bytes));
        }
        out.push(InputFile {
            path: f.path,
            content,
        });
    }
    Ok(out)
}

/// Whether decoded `files` fit a sandbox whose disk limit is `disk_bytes` (checked once the
/// limit is known: a session's after its lookup).
pub fn files_within(files: &[InputFile], disk_bytes: u64) -> SupervisorResult<()> {
    let total: u64 = files.iter().map(|f| f.content.len() as u64).sum();
    if total > disk_bytes {
        return Err(past_disk_limit(disk_bytes));
    }
    Ok(())
}

fn past_disk_limit(disk_bytes: u64) -> SupervisorError {
    SupervisorError::InvalidRequest(format!(
        "the files total more than the disk limit of {disk_bytes} bytes"
    ))
}

/// A shell script has no `tools` (code mode is Python's): a 400 naming the field.
pub fn no_tools_in_shell(
    language: Language,
    tools: &Option<crate::tools::Toolbox>,
) -> SupervisorResult<()> {
    if language == Language::Bash && tools.is_some() {
        return Err(SupervisorError::InvalidRequest(
            "tools: code mode runs Python; a program in language \"bash\" cannot have tools".into(),
        ));
    }
    Ok(())
}

/// The toolbox of a request's `tools` and `tool_limits` (`None` without tools), each fault
/// a 400 naming its field.
pub fn toolbox(
    tools: Vec<crate::tools::ToolSpec>,
    limits: Option<crate::tools::ToolLimitsRequest>,
) -> SupervisorResult<Option<crate::tools::Toolbox>> {
    let limits = limits
        .unwrap_or_default()
        .resolve()
        .map_err(|(field, max)| {
            SupervisorError::InvalidRequest(format!(
                "tool_limits.{field} must be between 1 and {max}"
            ))
        })?;
    if tools.is_empty() {
        return Ok(None);
    }
    let toolbox = crate::tools::Toolbox { tools, limits };
    toolbox
        .check()
        .map_err(|e| SupervisorError::InvalidRequest(e.to_string()))?;
    Ok(Some(toolbox))
}

/// The network grant and secrets of a request's `network` and `secrets`, for the caller
/// `record` names.
pub fn network_of(
    runner: &Runner,
    network: Option<NetworkRequest>,
    secrets: BTreeMap<String, SecretRequest>,
    record: &AuditRecord,
) -> SupervisorResult<(Option<crate::egress::Network>, crate::egress::Secrets)> {
    use crate::egress::SecretSource;
    let mut sources = Vec::with_capacity(secrets.len());
    for (name, s) in secrets {
        let source = match (s.value, s.hosts, s.operator) {
            (Some(value), Some(hosts), None) => SecretSource::Given { value, hosts },
            (None, None, Some(defined)) => SecretSource::Operator(defined),
            _ => {
                return Err(SupervisorError::InvalidRequest(format!(
                    "secrets.{name}: give `value` and `hosts`, or `operator` alone"
                )));
            }
        };
        sources.push((name, source));
    }
    runner.network_grant(network.map(|n| n.allow), sources, record.key_id.as_deref())
}

/// The packages of a command line that is exactly one `pip install NAME…` of plain words
/// (`guest::pip_install_line`): E2B's `commands.run` adds them to the session through the
/// host rather than running the line; any other line is the shell's.
pub fn packages_to_install(line: &str) -> Option<Vec<String>> {
    crate::guest::pip_install_line(line)
}

/// The mounts `asks` name, each checked (the volume's name, the mount point), none inside
/// another and no input file below one. Whether each volume exists is the runner's to find,
/// when it lends them.
pub fn volume_mounts(
    asks: Vec<VolumeMountRequest>,
    files: &[InputFile],
) -> SupervisorResult<Vec<VolumeMount>> {
    let bad = |why: String| SupervisorError::from(VolumeError::InvalidMount(why));
    let mounts = asks
        .into_iter()
        .map(|a| {
            Ok(VolumeMount {
                volume: VolumeName::parse(&a.name).map_err(|e| bad(e.to_string()))?,
                at: crate::guest::MountPoint::parse(&a.path).map_err(|e| bad(e.to_string()))?,
                read_only: a.read_only,
            })
        })
        .collect::<SupervisorResult<Vec<_>>>()?;
    crate::guest::check_mount_points(mounts.iter().map(|m| &m.at))
        .map_err(|e| bad(e.to_string()))?;
    for f in files {
        if let Some(m) = mounts.iter().find(|m| m.at.holds_relative(&f.path)) {
            return Err(bad(format!(
                "file {:?} lies where volume {} is mounted ({})",
                f.path,
                m.volume,
                m.at.as_str()
            )));
        }
    }
    Ok(mounts)
}

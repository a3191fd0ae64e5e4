//! The rule of a caller's environment variables, as every door takes them: bounded in count
//! and bytes, names without `=` or NUL, values without NUL.

/// The most variables a caller may pass.
pub const MAX_ENV_VARS: usize = 256;
/// The most bytes (names and values) a caller may pass.
pub const MAX_ENV_BYTES: usize = 64 << 10;

/// A variable the guest may not be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {name:?} is not allowed: {why}")]
pub struct EnvError {
    /// The variable (or, for the caps, what was too much).
    pub name: String,
    /// Why.
    pub why: String,
}

/// Whether `extra`, a caller's variables, may be given to a guest: at most [`MAX_ENV_VARS`]
/// and [`MAX_ENV_BYTES`], names non-empty without `=` or NUL, values without NUL.
pub fn check_env<'a>(
    extra: impl ExactSizeIterator<Item = (&'a str, &'a str)> + Clone,
) -> Result<(), EnvError> {
    if extra.len() > MAX_ENV_VARS {
        return Err(EnvError {
            name: format!("{} variables", extra.len()),
            why: format!("too many variables (at most {MAX_ENV_VARS})"),
        });
    }
    let total: usize = extra.clone().map(|(k, v)| k.len() + v.len()).sum();
    if total > MAX_ENV_BYTES {
        return Err(EnvError {
            name: format!("{total} bytes"),
            why: format!("environment larger than {} KiB", MAX_ENV_BYTES >> 10),
        });
    }
    for (k, v) in extra {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(EnvError {
                name: k.to_string(),
                why: "names must be non-empty, without '=' or NUL".into(),
            });
        }
        if v.contains('\0') {
            return Err(EnvError {
                name: k.to_string(),
                why: "values must not contain NUL".into(),
            });
        }
    }
    Ok(())
}

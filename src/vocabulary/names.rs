//! The rule for the names a tenant gives the things it keeps (volumes, templates).

/// The longest name.
pub const MAX_NAME: usize = 63;

/// Checks a tenant's name for a thing it keeps: 1 to 63 of `A-Z a-z 0-9 . _ -`, starting
/// with a letter or a digit (so it is never `.`, `..` or hidden), and a folder or file name
/// on every file system as it is. `Err` says why not.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err("a name is 1 to 63 characters");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return Err("a name starts with a letter or a digit");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("a name holds only letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

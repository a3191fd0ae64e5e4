//! How a session turn ended, when not with an error: what the runner answers and what a
//! code-mode turn's last stop carries (`supervisor::executions`).

use super::info::EndInfo;
use crate::check::Finding;
use crate::report::Report;

/// What a turn that ran did.
pub struct TurnDone {
    /// What it did.
    pub report: Report,
    /// `repr` of its final expression's value, if any.
    pub result: Option<String>,
    /// Set when this turn ended the session.
    pub ended: Option<EndInfo>,
    /// A limit or trap stopped the turn and the session went back to its state before it.
    pub rolled_back: bool,
    /// The session's turn count after this one.
    pub turn: u64,
    /// What the check found (`None` with policy `off`).
    pub findings: Option<Vec<Finding>>,
    /// It alone changed more than the session's kept turns may hold: no state before it is
    /// kept.
    pub unkept: bool,
}

/// How a turn ended, when not with an error.
pub enum Turned {
    /// The turn ran.
    Ran(Box<TurnDone>),
    /// The policy is `deny` and the check found these: nothing ran.
    Denied(Vec<Finding>),
}

impl Turned {
    /// The turn's result, for a door whose turns run unchecked (`Policy::Off`: an E2B cell or
    /// command, a Jupyter cell), which the check cannot refuse: were it refused all the same,
    /// an internal error, never a panic.
    pub fn unchecked(self) -> crate::supervisor::SupervisorResult<TurnDone> {
        match self {
            Turned::Ran(done) => Ok(*done),
            Turned::Denied(_) => Err(crate::supervisor::SupervisorError::Internal(
                "a turn run without the check was refused by it".into(),
            )),
        }
    }
}

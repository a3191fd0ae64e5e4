//! A finished session turn as a notebook shows it: its rich outputs, its main value (text,
//! and HTML when it has some) and its failure, named as a kernel names one. Shared by the
//! doors that speak a notebook's vocabulary (Jupyter's kernel protocol, E2B's code
//! interpreter), so both say the same of the same turn.

use crate::report::{Report, RichOutput, Status};
use crate::supervisor::runner::TurnDone;

/// A finished turn, as a notebook cell.
pub struct Cell {
    /// The turn number after it (a notebook's `execution_count`).
    pub turn: u64,
    /// `display()` and figures, in order (the main value's HTML taken out of them).
    pub displays: Vec<RichOutput>,
    /// The final expression's value.
    pub main: Option<MainValue>,
    /// Why the cell failed, if it did.
    pub failure: Option<Failure>,
    /// A note for each stream cut at the output limit (`stdout`, `stderr`).
    pub truncated: Vec<&'static str>,
}

/// A cell's final value: its `repr`, and its HTML (a DataFrame's) when it has one.
pub struct MainValue {
    pub text: String,
    pub html: Option<String>,
}

/// An exception the cell raised, or the limit or interrupt that stopped it.
pub struct Failure {
    /// `ZeroDivisionError`; `KeyboardInterrupt` for an interrupt; `Vivarium` + the status
    /// in camel case for a limit (`VivariumTimeout`).
    pub name: String,
    pub value: String,
    /// Its traceback's lines (for a limit: one line, `name: value`).
    pub traceback: Vec<String>,
}

impl Cell {
    /// The cell of a finished turn.
    pub fn of(done: TurnDone) -> Cell {
        let TurnDone {
            report,
            result,
            rolled_back,
            turn,
            ..
        } = done;
        let Report {
            mut outputs,
            error,
            status,
            detail,
            truncated,
            ..
        } = report;
        let truncated = [("stdout", truncated.stdout), ("stderr", truncated.stderr)]
            .into_iter()
            .filter_map(|(name, cut)| cut.then_some(name))
            .collect();
        // A final value with HTML (a DataFrame) came last among the outputs.
        let html = match (&result, outputs.last()) {
            (Some(_), Some(o)) if o.mime == "text/html" => outputs.pop().map(|o| o.data),
            _ => None,
        };
        let main = result.map(|text| MainValue { text, html });
        let failure = if let Some(e) = error {
            Some(Failure {
                name: e.kind,
                value: e.message,
                traceback: e.traceback.lines().map(str::to_string).collect(),
            })
        } else if status != Status::Ok {
            // A limit or an interrupt stopped the cell; the session went back to its state
            // after the previous cell.
            let name = match status {
                Status::Cancelled => "KeyboardInterrupt".to_string(),
                other => format!("Vivarium{}", camel(other.as_str())),
            };
            let mut value = match status {
                Status::Cancelled => "interrupted".to_string(),
                other => detail.unwrap_or_else(|| other.as_str().to_string()),
            };
            if rolled_back {
                value.push_str("; the state is as it was after the last completed cell");
            }
            Some(Failure {
                traceback: vec![format!("{name}: {value}")],
                name,
                value,
            })
        } else {
            None
        };
        Cell {
            turn,
            displays: outputs,
            main,
            failure,
            truncated,
        }
    }
}

/// `fuel_exhausted` → `FuelExhausted`.
fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

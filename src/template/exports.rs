//! Exporting a template's mutable globals, so that a session's whole state can be read and
//! written from the host (see `crate::sandbox::capture`).
//!
//! Wizer's output exports only what the guest did (`memory`, `turn`, …); a session snapshot
//! also needs the mutable globals (in this guest only clang's `__stack_pointer`, which is back
//! at its base between turns, but the snapshot does not rely on that). Each mutable global
//! `i` is exported as `vivarium.global.<i>`; nothing else in the module changes.

use wasm_encoder::{ExportKind, ExportSection, Module, RawSection};
use wasmparser::{ExternalKind, Parser, Payload, TypeRef};

/// The export name prefix of the mutable globals.
pub const GLOBAL_EXPORT_PREFIX: &str = "vivarium.global.";

/// Whether any function of `wasm` can write a table (`table.set`, `grow`, `fill`, `copy`,
/// `init`). A template must not: a session's snapshot leaves the table out, as the
/// template's in every instance (`crate::sandbox::capture`).
pub fn writes_tables(wasm: &[u8]) -> wasmtime::Result<bool> {
    use wasmparser::Operator;
    for payload in Parser::new(0).parse_all(wasm) {
        if let Payload::CodeSectionEntry(body) = payload? {
            let mut ops = body.get_operators_reader()?;
            while !ops.eof() {
                if matches!(
                    ops.read()?,
                    Operator::TableSet { .. }
                        | Operator::TableGrow { .. }
                        | Operator::TableFill { .. }
                        | Operator::TableCopy { .. }
                        | Operator::TableInit { .. }
                ) {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// `wasm` with every mutable global exported as [`GLOBAL_EXPORT_PREFIX`]`<index>` (an index
/// in the module's global index space, imports first). A module that has no export section
/// gets one.
pub fn export_mutable_globals(wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
    let mut imported_globals = 0u32;
    let mut mutable = Vec::new();
    let mut exports: Vec<(String, ExternalKind, u32)> = Vec::new();
    let mut had_exports = false;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    if let TypeRef::Global(g) = import?.ty {
                        if g.mutable {
                            mutable.push(imported_globals);
                        }
                        imported_globals += 1;
                    }
                }
            }
            Payload::GlobalSection(s) => {
                for (i, global) in s.into_iter().enumerate() {
                    if global?.ty.mutable {
                        mutable.push(imported_globals + i as u32);
                    }
                }
            }
            Payload::ExportSection(s) => {
                had_exports = true;
                for e in s {
                    let e = e?;
                    exports.push((e.name.to_string(), e.kind, e.index));
                }
            }
            _ => {}
        }
    }
    let mut section = ExportSection::new();
    for (name, kind, index) in &exports {
        section.export(name, export_kind(*kind)?, *index);
    }
    for index in &mutable {
        section.export(
            &format!("{GLOBAL_EXPORT_PREFIX}{index}"),
            ExportKind::Global,
            *index,
        );
    }
    let mut out = Module::new();
    let mut placed = false;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        let Some((id, range)) = payload.as_section() else {
            continue;
        };
        let is_export = matches!(payload, Payload::ExportSection(_));
        // Sections come in a fixed order: without an export section, ours goes before the
        // first section that must follow it (start, element, data count, code, data).
        if !had_exports && !placed && matches!(id, 8..=12) {
            out.section(&section);
            placed = true;
        }
        if is_export {
            out.section(&section);
            placed = true;
        } else {
            out.section(&RawSection {
                id,
                data: &wasm[range],
            });
        }
    }
    if !placed {
        out.section(&section);
    }
    Ok(out.finish())
}

fn export_kind(kind: ExternalKind) -> wasmtime::Result<ExportKind> {
    Ok(match kind {
        ExternalKind::Func => ExportKind::Func,
        ExternalKind::Table => ExportKind::Table,
        ExternalKind::Memory => ExportKind::Memory,
        ExternalKind::Global => ExportKind::Global,
        ExternalKind::Tag => ExportKind::Tag,
        // The encoder cannot say "exact"; re-encoding it as a plain export would change the
        // module's meaning, so refuse (the guest has none).
        ExternalKind::FuncExact => wasmtime::bail!("an exact-type function export"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exported_globals(wasm: &[u8]) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for p in Parser::new(0).parse_all(wasm) {
            if let Payload::ExportSection(s) = p.unwrap() {
                for e in s {
                    let e = e.unwrap();
                    if e.kind == ExternalKind::Global {
                        out.push((e.name.to_string(), e.index));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn mutable_globals_are_exported_and_the_rest_is_kept() {
        let wasm = wat::parse_str(
            r#"(module
                 (import "env" "g" (global (mut i32)))
                 (import "env" "c" (global i32))
                 (memory (export "memory") 1)
                 (global $sp (mut i32) (i32.const 16))
                 (global $k i64 (i64.const 7))
                 (global $f (mut f64) (f64.const 1.5))
                 (func (export "get") (result i32) global.get $sp)
                 (data (i32.const 0) "abc"))"#,
        )
        .unwrap();
        let out = export_mutable_globals(&wasm).unwrap();
        wasmparser::Validator::new().validate_all(&out).unwrap();
        assert_eq!(
            exported_globals(&out),
            [
                ("vivarium.global.0".to_string(), 0),
                ("vivarium.global.2".to_string(), 2),
                ("vivarium.global.4".to_string(), 4),
            ]
        );
        // Everything else is byte for byte what it was: only the export section grew.
        assert!(out.len() > wasm.len());
        assert!(out.windows(3).any(|w| w == b"abc"));
    }

    #[test]
    fn table_writes_are_found() {
        let quiet =
            wat::parse_str(r#"(module (table 1 funcref) (func (result i32) (i32.const 1)))"#)
                .unwrap();
        assert!(!writes_tables(&quiet).unwrap());
        let grows = wat::parse_str(
            r#"(module (table 1 funcref)
                 (func (drop (table.grow 0 (ref.null func) (i32.const 1)))))"#,
        )
        .unwrap();
        assert!(writes_tables(&grows).unwrap());
    }

    #[test]
    fn a_module_without_exports_gets_an_export_section() {
        let wasm = wat::parse_str(
            r#"(module (global (mut i32) (i32.const 1)) (func) (data (i32.const 0) "x") (memory 1))"#,
        )
        .unwrap();
        let out = export_mutable_globals(&wasm).unwrap();
        wasmparser::Validator::new().validate_all(&out).unwrap();
        assert_eq!(
            exported_globals(&out),
            [("vivarium.global.0".to_string(), 0)]
        );
    }
}

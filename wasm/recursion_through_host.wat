;; Recursion that passes through host frames on every level (a WASI call per level), so the
;; native stack holds host frames between wasm frames.
(module
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (memory (export "memory") 1)
  (func $f (param i32) (result i32)
    (i32.add (call $yield) (call $f (i32.add (local.get 0) (i32.const 1)))))
  (func (export "run") (result i32) (call $f (i32.const 0))))
